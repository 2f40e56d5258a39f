namespace Spindle.Polling;

/// <summary>
/// What the I/O driver and the pool's socket registry ask of a socket: readiness to signal and a close when the pool's
/// shutdown begins. Implemented by the public socket type, which lives above the pool's façade; the driver below it
/// knows sockets only through this.
/// </summary>
internal interface IPolledSocket
{
    /// <summary>The poller saw readiness events (epoll flags) for the socket.</summary>
    void OnReadiness(uint events);

    /// <summary>The pool begins to shut down: pending and later operations fail with an <see cref="System.ObjectDisposedException"/>.</summary>
    void CloseForShutdown();
}
