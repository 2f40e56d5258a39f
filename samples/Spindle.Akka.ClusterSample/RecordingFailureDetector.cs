using System;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Threading;
using Akka.Configuration;
using Akka.Event;
using Akka.Remote;

namespace Spindle.Akka.ClusterSample;

/// <summary>
/// The cluster's failure detector (Akka.NET's phi accrual detector, which decides availability as usual) with a record
/// of the heartbeats it was given: the longest gap between two of them. Akka.NET makes one per monitored node, through
/// <c>akka.cluster.failure-detector.implementation-class</c>.
/// </summary>
public sealed class RecordingFailureDetector : FailureDetector
{
    private static readonly ConcurrentQueue<RecordingFailureDetector> s_all = new();

    private readonly PhiAccrualFailureDetector _inner;
    private long _last = Stopwatch.GetTimestamp();
    private long _maxGap;
    private int _beats;

    /// <summary>Called by Akka.NET with the cluster's failure-detector section.</summary>
    public RecordingFailureDetector(Config config, EventStream eventStream)
    {
        _inner = new PhiAccrualFailureDetector(config, eventStream);
        s_all.Enqueue(this);
    }

    /// <summary>Every detector made since the process started.</summary>
    public static RecordingFailureDetector[] All => s_all.ToArray();

    /// <summary>
    /// The longest time without a heartbeat since the last <see cref="Reset"/>: between two heartbeats, or from the
    /// last one (or the reset) until now.
    /// </summary>
    public TimeSpan MaxGap
    {
        get
        {
            long open = Stopwatch.GetTimestamp() - Interlocked.Read(ref _last);
            return Stopwatch.GetElapsedTime(0, Math.Max(open, Interlocked.Read(ref _maxGap)));
        }
    }

    /// <summary>How many heartbeats the detector has had.</summary>
    public int Beats => Volatile.Read(ref _beats);

    /// <summary>Forgets the gaps seen so far: the record starts now.</summary>
    public void Reset()
    {
        Interlocked.Exchange(ref _maxGap, 0);
        Interlocked.Exchange(ref _last, Stopwatch.GetTimestamp());
    }

    /// <inheritdoc/>
    public override bool IsAvailable => _inner.IsAvailable;

    /// <inheritdoc/>
    public override bool IsMonitoring => _inner.IsMonitoring;

    /// <inheritdoc/>
    public override void HeartBeat()
    {
        long now = Stopwatch.GetTimestamp();
        long gap = now - Interlocked.Exchange(ref _last, now);
        long max;
        while (gap > (max = Interlocked.Read(ref _maxGap)) && Interlocked.CompareExchange(ref _maxGap, gap, max) != max)
        {
        }
        Interlocked.Increment(ref _beats);
        _inner.HeartBeat();
    }
}
