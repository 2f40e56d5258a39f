using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// The only two kinds of waiting the tests do: a generous bound for what must happen, and a short watch for what must
/// not happen. Nothing here measures speed.
/// </summary>
internal static class Waits
{
    /// <summary>How long a test waits for something that must happen.</summary>
    public static readonly TimeSpan MustHappen = TimeSpan.FromMilliseconds(MustHappenMilliseconds);

    /// <summary><see cref="MustHappen"/> for APIs that take milliseconds.</summary>
    public const int MustHappenMilliseconds = 30_000;

    /// <summary>How long a test watches for something that must not happen.</summary>
    public static readonly TimeSpan MustNotHappen = TimeSpan.FromMilliseconds(200);

    /// <summary>Polls <paramref name="condition"/> until it holds or <paramref name="timeout"/> passes; returns its last value.</summary>
    public static bool Poll(Func<bool> condition, TimeSpan timeout)
    {
        long deadline = Environment.TickCount64 + (long)timeout.TotalMilliseconds;
        var spinner = new SpinWait();
        while (!condition())
        {
            if (Environment.TickCount64 >= deadline)
            {
                return condition();
            }
            if (spinner.Count < 30)
            {
                spinner.SpinOnce(sleep1Threshold: -1);
            }
            else
            {
                Thread.Sleep(1);
            }
        }
        return true;
    }

    public static void Until(Func<bool> condition, string what) =>
        Assert.True(Poll(condition, MustHappen), $"Did not happen within {MustHappen.TotalSeconds} s: {what}");

    public static void For(ManualResetEventSlim signal, string what) =>
        Assert.True(signal.Wait(MustHappen), $"Not signalled within {MustHappen.TotalSeconds} s: {what}");

    public static void For(CountdownEvent countdown, string what) =>
        Assert.True(countdown.Wait(MustHappen),
            $"Not signalled within {MustHappen.TotalSeconds} s: {what} ({countdown.CurrentCount} of {countdown.InitialCount} still missing)");

    public static void For(SemaphoreSlim semaphore, string what) =>
        Assert.True(semaphore.Wait(MustHappen), $"Not released within {MustHappen.TotalSeconds} s: {what}");

    /// <summary>Asserts that <paramref name="condition"/> stays false for the short must-not-happen window.</summary>
    public static void Never(Func<bool> condition, string what) =>
        Assert.False(Poll(condition, MustNotHappen), $"Happened, but must not: {what}");

    /// <summary>Starts a background thread (a hung test cannot keep the host alive; an exception is kept for Join).</summary>
    public static TestThread Start(Action body, string name) => new(body, name);

    /// <summary>Runs <paramref name="body"/> on a background thread and waits for it with the must-happen bound.</summary>
    public static void RunBounded(Action body, string what) => Start(body, what).Join();
}
