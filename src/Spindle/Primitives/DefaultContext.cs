using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Spindle.Primitives;

/// <summary>
/// The runtime's default <see cref="ExecutionContext"/> (no AsyncLocal values), as captured on a fresh pool thread: an
/// item that carries it needs no <see cref="ExecutionContext.Run"/>, because a pool thread runs in it between items. A
/// process-wide fact of the runtime, learnt once (every capture on a fresh thread yields the same object), not a
/// setting.
/// </summary>
internal static class DefaultContext
{
    private static ExecutionContext? s_value;

    /// <summary>The default context, once a pool thread has started (null before).</summary>
    public static ExecutionContext? Value => s_value;

    /// <summary>Called first thing on every pool thread: learns the default context (the thread was started without flowing one).</summary>
    [MethodImpl(RarePath.Compile)]
    public static void OnPoolThreadStarted() => s_value ??= ExecutionContext.Capture();

    /// <summary>Whether <paramref name="context"/> is the runtime's default context.</summary>
    public static bool Is(ExecutionContext context) => ReferenceEquals(context, Volatile.Read(ref s_value) ?? Probe());

    /// <summary>
    /// Learns the default context before any pool thread has started: a thread started without flowing its creator's
    /// context runs in it. Once per process, and only if a pool creates a timer before any of its threads exists.
    /// </summary>
    /// <remarks>If the OS refuses the probe thread, nothing is learnt (null: no context counts as the default, which only
    /// costs a context switch per item) and a later call tries again.</remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static ExecutionContext? Probe()
    {
        ExecutionContext? captured = null;
        var probe = new Thread(() => captured = ExecutionContext.Capture(), 64 * 1024) { IsBackground = true, Name = "Spindle context probe" };
        try
        {
            probe.UnsafeStart(); // UnsafeStart: the probe does not run in this thread's context
        }
        catch (Exception e) when (e is OutOfMemoryException or ThreadStartException)
        {
            return null;
        }
        probe.Join();
        Interlocked.CompareExchange(ref s_value, captured, null);
        return s_value!;
    }
}
