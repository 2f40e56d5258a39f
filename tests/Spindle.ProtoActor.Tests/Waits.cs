using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.ProtoActor.Tests;

/// <summary>
/// The two kinds of waiting the tests do: a generous bound for what must happen, and a short watch for what must not
/// happen. Nothing here measures speed.
/// </summary>
internal static class Waits
{
    /// <summary>How long a test waits for something that must happen.</summary>
    public static readonly TimeSpan MustHappen = TimeSpan.FromSeconds(30);

    /// <summary>How long a test watches for something that must not happen.</summary>
    public static readonly TimeSpan MustNotHappen = TimeSpan.FromMilliseconds(200);

    public static void For(CountdownEvent countdown, string what) =>
        Assert.True(countdown.Wait(MustHappen),
            $"Not signalled within {MustHappen.TotalSeconds} s: {what} ({countdown.CurrentCount} of {countdown.InitialCount} still missing)");

    public static void For(ManualResetEventSlim signal, string what) =>
        Assert.True(signal.Wait(MustHappen), $"Not signalled within {MustHappen.TotalSeconds} s: {what}");

    public static async Task<T> For<T>(Task<T> task, string what)
    {
        Task first = await Task.WhenAny(task, Task.Delay(MustHappen)).ConfigureAwait(false);
        Assert.True(first == task, $"Did not complete within {MustHappen.TotalSeconds} s: {what}");
        return await task.ConfigureAwait(false);
    }

    /// <summary>Polls <paramref name="condition"/> until it holds, for at most the must-happen bound.</summary>
    public static void Until(Func<bool> condition, string what)
    {
        long deadline = Environment.TickCount64 + (long)MustHappen.TotalMilliseconds;
        while (!condition())
        {
            Assert.True(Environment.TickCount64 < deadline, $"Did not happen within {MustHappen.TotalSeconds} s: {what}");
            Thread.Sleep(1);
        }
    }
}
