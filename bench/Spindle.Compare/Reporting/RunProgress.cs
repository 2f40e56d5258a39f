using System;
using System.Diagnostics;
using System.Globalization;

namespace Spindle.Compare.Reporting;

/// <summary>
/// How far a comparison has come: child runs done of the total it planned, and the time left, estimated from the mean
/// wall time of the runs done so far (scenarios differ, so the estimate moves as they pass; it is marked "about").
/// </summary>
internal sealed class RunProgress
{
    private readonly Stopwatch _clock = Stopwatch.StartNew();

    public RunProgress(int total)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(total);
        Total = total;
    }

    public int Total { get; }

    public int Done { get; private set; }

    public TimeSpan Elapsed => _clock.Elapsed;

    /// <summary>Null until a run has finished.</summary>
    public TimeSpan? Remaining => Done == 0 ? null : TimeSpan.FromTicks(_clock.Elapsed.Ticks / Done * (Total - Done));

    public void RunFinished() => Done++;

    /// <summary>"[12/340, 4%, about 9m 10s left]": the prefix of each run's line.</summary>
    public string Prefix()
    {
        int percent = Total == 0 ? 100 : (int)(100L * Done / Total);
        string left = Remaining is { } remaining ? $", about {Format(remaining)} left" : "";
        return string.Create(CultureInfo.InvariantCulture, $"[{Done}/{Total}, {percent}%{left}]");
    }

    public static string Format(TimeSpan elapsed) =>
        elapsed.TotalMinutes >= 1
            ? string.Create(CultureInfo.InvariantCulture, $"{(int)elapsed.TotalMinutes}m {elapsed.Seconds}s")
            : string.Create(CultureInfo.InvariantCulture, $"{elapsed.TotalSeconds:F1}s");
}
