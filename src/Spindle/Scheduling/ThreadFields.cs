using System;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Spindle.Scheduling;

/// <summary>
/// The runtime's own per-thread fields that a pool thread checks between items, read directly instead of through the
/// public properties: the thread's ExecutionContext and SynchronizationContext (the properties first look up the
/// current thread in thread-local storage, and <see cref="ExecutionContext.Capture"/> also tests for a suppressed
/// flow), and the flag that the runtime raises whenever code sets a thread's name, priority or background state (the property getters
/// for the last two ask the runtime, per call). The built-in thread pool reads the same three fields after every item.
/// The cultures need no check of their own: <see cref="CultureInfo.CurrentCulture"/> and
/// <see cref="CultureInfo.CurrentUICulture"/> are AsyncLocal values, so setting either gives the thread a non-default
/// ExecutionContext, and restoring the default context restores them (each culture getter is a thread-local lookup).
/// </summary>
/// <remarks>
/// These fields are private details of the runtime, reached through <see cref="UnsafeAccessorAttribute"/> (trimming and
/// NativeAOT keep them). <see cref="Available"/> says whether they were found and behave as expected, checked once per
/// process on a probe thread: the fields exist, a new thread's contexts are null, naming the probe raises the flag, and
/// setting a culture gives it an ExecutionContext.
/// If any check fails (another runtime), <see cref="PoolThreadState"/> uses the public properties instead, with the
/// same outcome.
/// </remarks>
internal static class ThreadFields
{
    /// <summary>Whether the fields can be read (see the remarks); decided once, on first use.</summary>
    public static readonly bool Available = Probe();

    [UnsafeAccessor(UnsafeAccessorKind.Field, Name = "_executionContext")]
    public static extern ref ExecutionContext? ExecutionContextOf(Thread thread);

    [UnsafeAccessor(UnsafeAccessorKind.Field, Name = "_synchronizationContext")]
    public static extern ref SynchronizationContext? SynchronizationContextOf(Thread thread);

    /// <summary>Raised by the runtime when the thread's name, priority or background state is set; the reader clears it.</summary>
    [UnsafeAccessor(UnsafeAccessorKind.Field, Name = "_mayNeedResetForThreadPool")]
    public static extern ref bool MayNeedResetOf(Thread thread);

    private static bool Probe()
    {
        bool works = false;
        var probe = new Thread(() =>
        {
            try
            {
                Thread self = Thread.CurrentThread;
                bool clean = ExecutionContextOf(self) is null && SynchronizationContextOf(self) is null;
                MayNeedResetOf(self) = false;
                self.Name = "Spindle field probe";
                bool flagged = MayNeedResetOf(self);
                SynchronizationContext.SetSynchronizationContext(new SynchronizationContext());
                bool seesContext = SynchronizationContextOf(self) is not null;
                // The cultures are AsyncLocal values: setting one gives the thread a non-default ExecutionContext.
                CultureInfo.CurrentUICulture = (CultureInfo)CultureInfo.InvariantCulture.Clone();
                bool cultureInContext = ExecutionContextOf(self) is not null;
                works = clean && flagged && seesContext && cultureInContext;
            }
            catch (MissingMemberException)
            {
                works = false;
            }
        }, 64 * 1024)
        { IsBackground = true };
        try
        {
            probe.UnsafeStart(); // no ExecutionContext flows in, as for a pool thread
            probe.Join();
        }
        catch (OutOfMemoryException)
        {
            return false; // no thread to probe with: the public properties it is
        }
        catch (ThreadStartException)
        {
            return false;
        }
        return works;
    }
}
