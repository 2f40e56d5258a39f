namespace Spindle.Scheduling;

/// <summary>
/// What workers and the thread controller ask of the pool's timer service, which sits above them: a worker's look at
/// the timer deadline (expiring due timers itself when the timer thread is late), and the thread controller's news of
/// the first worker and of the stop.
/// </summary>
internal interface IWorkerTimers
{
    /// <summary>
    /// A worker's look between items: expires due timers if the timer thread is late. Returns the timestamp it read, or
    /// 0 when no timer is scheduled.
    /// </summary>
    long AssistTimers();

    /// <summary>A worker was added: the timer thread watches for stuck items while the pool has workers.</summary>
    void OnWorkerAdded();

    /// <summary>The pool has stopped: the timer thread may exit once nothing needs it.</summary>
    void ReleaseThreadAfterStop();
}
