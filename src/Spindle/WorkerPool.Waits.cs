using System;
using System.Collections.Generic;
using System.Threading;
using Spindle.Queues;
using Spindle.Registrations;

namespace Spindle;

public sealed partial class WorkerPool
{
    /// <summary>Wait threads that exist right now (each watches up to 63 <see cref="WaitHandle"/> registrations).</summary>
    public int WaitThreadCount => _waits.WaitThreadCount;

    /// <summary>Registrations that have not ended (a snapshot): not unregistered, and not run-once ones whose callback has run.</summary>
    public int RegisteredWaitCount => _waits.RegistrationCount;

    /// <summary>
    /// Queues <paramref name="callBack"/> on this pool each time <paramref name="waitObject"/> is signalled or
    /// <paramref name="timeout"/> passes without a signal, like <see cref="ThreadPool.RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.
    /// </summary>
    /// <param name="waitObject">Any wait handle. Handles are watched by wait threads of this pool, 63 per thread (the
    /// most <see cref="WaitHandle.WaitAny(WaitHandle[], int)"/> allows besides the thread's own change event). A
    /// <see cref="PoolSignal"/> registration (<see cref="RegisterWait(PoolSignal, WaitOrTimerCallback, object?, TimeSpan, bool)"/>)
    /// needs no thread at all.</param>
    /// <param name="callBack">Called with <paramref name="state"/> and whether the wait timed out. It flows the caller's
    /// <see cref="ExecutionContext"/> when the pool does; exceptions follow the pool's <see cref="ExceptionPolicy"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="timeout">How long each wait lasts before the callback runs with <c>timedOut</c> true and the wait
    /// starts again; <see cref="Timeout.InfiniteTimeSpan"/> for none. The clock restarts after each signal and each
    /// timeout. A timeout is measured with the precise clock (<see cref="System.Diagnostics.Stopwatch"/>), fractions of
    /// a millisecond included, and never comes early. What is accepted is what the built-in pool accepts: the timeout
    /// in whole milliseconds, truncated toward zero, from -1 to <see cref="int.MaxValue"/>; so a timeout that truncates
    /// to -1 ms is infinite, a shorter negative one is zero, and one a fraction above <see cref="int.MaxValue"/>
    /// milliseconds is <see cref="int.MaxValue"/> milliseconds.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <remarks>Disposing <paramref name="waitObject"/> while it is registered unregisters the registration.</remarks>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="timeout"/> in whole milliseconds is less than -1
    /// or greater than <see cref="int.MaxValue"/> (checked first, as the built-in pool does).</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, TimeSpan timeout, bool executeOnlyOnce)
    {
        timeout = NormalizeHandleWaitTimeout(timeout);
        ArgumentNullException.ThrowIfNull(waitObject);
        ArgumentNullException.ThrowIfNull(callBack);
        // As with the built-in pool, a disposed handle is refused here, before anything is recorded or a slot taken (a
        // handle disposed later is found by its wait thread, whose WaitAny throws for it, and unregistered there).
        ObjectDisposedException.ThrowIf(waitObject.SafeWaitHandle.IsClosed, waitObject);
        return _waits.RegisterHandle(waitObject, callBack, state, CaptureContext(), timeout, executeOnlyOnce);
    }

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (<see cref="Timeout.Infinite"/> for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeOutInterval">The timeout in milliseconds; <see cref="Timeout.Infinite"/> for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeOutInterval"/> is less than -1.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, int millisecondsTimeOutInterval, bool executeOnlyOnce)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(millisecondsTimeOutInterval, -1);
        return RegisterWaitForSingleObject(waitObject, callBack, state, TimeSpan.FromMilliseconds(millisecondsTimeOutInterval), executeOnlyOnce);
    }

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (-1 for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeOutInterval">The timeout in milliseconds, at most <see cref="int.MaxValue"/>; -1 for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeOutInterval"/> is less than -1 or greater
    /// than <see cref="int.MaxValue"/>.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, long millisecondsTimeOutInterval, bool executeOnlyOnce)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(millisecondsTimeOutInterval, -1);
        ArgumentOutOfRangeException.ThrowIfGreaterThan(millisecondsTimeOutInterval, int.MaxValue);
        return RegisterWaitForSingleObject(waitObject, callBack, state, TimeSpan.FromMilliseconds(millisecondsTimeOutInterval), executeOnlyOnce);
    }

    /// <summary>Same as <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>
    /// with the timeout in milliseconds (<see cref="uint.MaxValue"/>, which is -1 as an unsigned number, for none).</summary>
    /// <param name="waitObject">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="callBack">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="millisecondsTimeOutInterval">The timeout in milliseconds, at most <see cref="int.MaxValue"/>;
    /// <see cref="uint.MaxValue"/> for none.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="waitObject"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="millisecondsTimeOutInterval"/> is greater than
    /// <see cref="int.MaxValue"/> and is not <see cref="uint.MaxValue"/>.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down, or
    /// <paramref name="waitObject"/> has been disposed.</exception>
    public RegisteredWait RegisterWaitForSingleObject(WaitHandle waitObject, WaitOrTimerCallback callBack, object? state, uint millisecondsTimeOutInterval, bool executeOnlyOnce)
    {
        if (millisecondsTimeOutInterval > int.MaxValue && millisecondsTimeOutInterval != uint.MaxValue)
        {
            throw new ArgumentOutOfRangeException(nameof(millisecondsTimeOutInterval), millisecondsTimeOutInterval, "The timeout must be at most int.MaxValue milliseconds, or uint.MaxValue for none.");
        }
        TimeSpan timeout = millisecondsTimeOutInterval == uint.MaxValue ? Timeout.InfiniteTimeSpan : TimeSpan.FromMilliseconds(millisecondsTimeOutInterval);
        return RegisterWaitForSingleObject(waitObject, callBack, state, timeout, executeOnlyOnce);
    }

    /// <summary>
    /// Queues <paramref name="callBack"/> on this pool each time <paramref name="signal"/> releases the registration or
    /// <paramref name="timeout"/> passes without a release. The registration holds no thread: <see cref="PoolSignal.Set"/>
    /// queues the callback directly, and the timeout is an entry of the pool's timing wheel.
    /// </summary>
    /// <param name="signal">The signal. If it is set now, the callback is queued at once (an auto-reset signal is
    /// consumed).</param>
    /// <param name="callBack">Called with <paramref name="state"/> and whether the wait timed out. It flows the caller's
    /// <see cref="ExecutionContext"/> when the pool does; exceptions follow the pool's <see cref="ExceptionPolicy"/>.</param>
    /// <param name="state">Passed to <paramref name="callBack"/>.</param>
    /// <param name="timeout">See <see cref="RegisterWaitForSingleObject(WaitHandle, WaitOrTimerCallback, object?, TimeSpan, bool)"/>.
    /// The timeout is an entry of the pool's millisecond timing wheel: each comes at the first wheel tick at or after
    /// the full timeout (fractions of a millisecond included, at least one tick for a zero timeout of a repeating
    /// registration), counted from the registration, the last signal or, for a repeating registration, the start of
    /// the last timeout's callback, so none comes early. A finite timeout needs the
    /// pool's timer thread: if it cannot be started, the call throws what the thread start threw, having registered
    /// nothing.</param>
    /// <param name="executeOnlyOnce">Stop after the first callback.</param>
    /// <returns>The registration; call <see cref="RegisteredWait.Unregister(WaitHandle?)"/> to end it.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="signal"/> or <paramref name="callBack"/> is null.</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="timeout"/> is negative (other than infinite) or
    /// longer than <see cref="int.MaxValue"/> milliseconds.</exception>
    /// <exception cref="ObjectDisposedException">The pool is shutting down or has shut down.</exception>
    public RegisteredWait RegisterWait(PoolSignal signal, WaitOrTimerCallback callBack, object? state, TimeSpan timeout, bool executeOnlyOnce)
    {
        ArgumentNullException.ThrowIfNull(signal);
        ArgumentNullException.ThrowIfNull(callBack);
        ValidateWaitTimeout(timeout);
        return _waits.RegisterSignal(signal, callBack, state, CaptureContext(), timeout, executeOnlyOnce);
    }

    private static readonly TimeSpan s_maxWaitTimeout = TimeSpan.FromMilliseconds(int.MaxValue);

    /// <summary>
    /// The built-in pool's rule for its <see cref="TimeSpan"/> overload: the timeout's whole milliseconds (truncated
    /// toward zero) must lie between -1 and <see cref="int.MaxValue"/>. What passes is kept whole, fractions of a
    /// millisecond included (see <see cref="RegisteredWait.TimeoutTicks"/>), within what the rule means: -1 ms is
    /// infinite, a fraction below zero is zero, a fraction above the maximum is the maximum.
    /// </summary>
    private static TimeSpan NormalizeHandleWaitTimeout(TimeSpan timeout)
    {
        long milliseconds = (long)timeout.TotalMilliseconds;
        ArgumentOutOfRangeException.ThrowIfLessThan(milliseconds, -1, nameof(timeout));
        ArgumentOutOfRangeException.ThrowIfGreaterThan(milliseconds, int.MaxValue, nameof(timeout));
        if (milliseconds == -1)
        {
            return Timeout.InfiniteTimeSpan;
        }
        if (timeout < TimeSpan.Zero)
        {
            return TimeSpan.Zero;
        }
        return timeout > s_maxWaitTimeout ? s_maxWaitTimeout : timeout;
    }

    /// <summary>The timeout is kept whole (no rounding to milliseconds): see <see cref="RegisteredWait.TimeoutTicks"/>.</summary>
    private static void ValidateWaitTimeout(TimeSpan timeout)
    {
        if (timeout != Timeout.InfiniteTimeSpan && (timeout < TimeSpan.Zero || timeout.TotalMilliseconds > int.MaxValue))
        {
            throw new ArgumentOutOfRangeException(nameof(timeout), timeout, "The timeout must be between 0 and int.MaxValue milliseconds, or Timeout.InfiniteTimeSpan.");
        }
    }

}
