using System;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

internal static class Waits
{
    /// <summary>How long a scenario waits for its own work before declaring the pool stuck (below the parent's timeout).</summary>
    public static readonly TimeSpan Stuck = TimeSpan.FromSeconds(90);

    /// <summary>Waits for <paramref name="signal"/> or throws a <see cref="TimeoutException"/> naming what was awaited.</summary>
    public static void OrThrow(ManualResetEventSlim signal, string what)
    {
        if (!signal.Wait(Stuck))
        {
            throw new TimeoutException($"Timed out after {Stuck.TotalSeconds:F0} s waiting for {what}.");
        }
    }
}
