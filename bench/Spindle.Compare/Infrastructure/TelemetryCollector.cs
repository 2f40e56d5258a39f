using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using System.Diagnostics.Tracing;
using System.Numerics;
using System.Threading;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// Collects a pool's telemetry (<see cref="IPoolUnderTest.Telemetry"/>) inside the process, the way a monitoring agent
/// would: a <see cref="MeterListener"/> enabling every instrument of the pool's meter, whose observable instruments a
/// background thread collects every 100 ms (an exporter's collection interval), and an <see cref="EventListener"/>
/// enabling the pool's event sources. The same code serves every pool; only the names, keywords and levels differ.
/// </summary>
/// <remarks>
/// Aggregation is kept cheap: each instrument counts its measurements and sums their values into its own fields
/// (tags are ignored); events are only counted. Events of the runtime's own source reach the listener through the
/// runtime's event pipe (a dispatching thread); the others are delivered on the thread that writes them.
/// </remarks>
internal sealed class TelemetryCollector : IDisposable
{
    private const int IntervalMs = 100;

    private readonly MeterListener _meters = new();
    private readonly List<InstrumentTotals> _instruments = [];
    private readonly Listener _events;
    private readonly ManualResetEventSlim _stop = new(false);
    private readonly Thread _thread;
    private readonly string _meterName;
    private bool _stopped;

    private TelemetryCollector(PoolTelemetry telemetry)
    {
        _meterName = telemetry.MeterName;
        _meters.InstrumentPublished = (instrument, listener) =>
        {
            if (instrument.Meter.Name == _meterName)
            {
                var totals = new InstrumentTotals();
                lock (_instruments)
                {
                    _instruments.Add(totals);
                }
                listener.EnableMeasurementEvents(instrument, totals);
            }
        };
        _meters.SetMeasurementEventCallback<byte>(OnMeasurement);
        _meters.SetMeasurementEventCallback<short>(OnMeasurement);
        _meters.SetMeasurementEventCallback<int>(OnMeasurement);
        _meters.SetMeasurementEventCallback<long>(OnMeasurement);
        _meters.SetMeasurementEventCallback<float>(OnMeasurement);
        _meters.SetMeasurementEventCallback<double>(OnMeasurement);
        _meters.SetMeasurementEventCallback<decimal>(OnMeasurement);
        _meters.Start();
        _events = new Listener(telemetry.EventSources);
        _thread = new Thread(Collect, 64 * 1024) { IsBackground = true, Name = "telemetry collector" };
        _thread.Start();
    }

    /// <summary>Starts listening to <paramref name="telemetry"/> and collecting its observable instruments.</summary>
    public static TelemetryCollector Start(PoolTelemetry telemetry) => new(telemetry);

    /// <summary>Instruments of the pool's meter the listener enabled.</summary>
    private int InstrumentCount
    {
        get
        {
            lock (_instruments)
            {
                return _instruments.Count;
            }
        }
    }

    /// <summary>Measurements received so far, all instruments together.</summary>
    private long MeasurementCount
    {
        get
        {
            lock (_instruments)
            {
                long count = 0;
                foreach (InstrumentTotals totals in _instruments)
                {
                    count += Volatile.Read(ref totals.Count);
                }
                return count;
            }
        }
    }

    /// <summary>
    /// Stops collecting (after one last collection) and disposes the listeners. Throws if the listener enabled no
    /// instrument or received no measurement, since the run would then not have been observed.
    /// </summary>
    public void Finish()
    {
        Stop();
        int instruments = InstrumentCount;
        long measurements = MeasurementCount;
        if (instruments == 0 || measurements == 0)
        {
            throw new InvalidOperationException(
                $"The listener saw {instruments} instruments and {measurements} measurements of the meter '{_meterName}'.");
        }
    }

    /// <summary>Stops collecting and disposes the listeners (without <see cref="Finish"/>'s check).</summary>
    public void Dispose() => Stop();

    private void Stop()
    {
        if (_stopped)
        {
            return;
        }
        _stopped = true;
        _stop.Set();
        _thread.Join();
        _meters.RecordObservableInstruments();
        _meters.Dispose();
        _events.Dispose();
        _stop.Dispose();
    }

    private void Collect()
    {
        while (!_stop.Wait(IntervalMs))
        {
            _meters.RecordObservableInstruments();
        }
    }

    private static void OnMeasurement<T>(Instrument instrument, T measurement, ReadOnlySpan<KeyValuePair<string, object?>> tags, object? state)
        where T : struct, INumberBase<T> =>
        ((InstrumentTotals)state!).Add(double.CreateTruncating(measurement));

    /// <summary>One instrument's aggregate: how many measurements, and their sum.</summary>
    private sealed class InstrumentTotals
    {
        public long Count;
        private double _sum;

        public void Add(double value)
        {
            Interlocked.Increment(ref Count);
            double sum = Volatile.Read(ref _sum);
            while (true)
            {
                double seen = Interlocked.CompareExchange(ref _sum, sum + value, sum);
                if (seen.Equals(sum))
                {
                    return;
                }
                sum = seen;
            }
        }
    }

    /// <summary>Enables the chosen sources as they are created (or at once, for those that exist) and counts their events.</summary>
    private sealed class Listener(IReadOnlyList<EventSourceSelection> sources) : EventListener
    {
        // A field initializer runs before the base constructor, which calls OnEventSourceCreated for the sources that
        // already exist: the selection must be set by then.
        private readonly IReadOnlyList<EventSourceSelection> _sources = sources;

        /// <summary>Events received, all sources together.</summary>
        public long Count;

        protected override void OnEventSourceCreated(EventSource eventSource)
        {
            foreach (EventSourceSelection source in _sources)
            {
                if (eventSource.Name == source.Name)
                {
                    EnableEvents(eventSource, source.Level, source.Keywords);
                }
            }
        }

        protected override void OnEventWritten(EventWrittenEventArgs eventData) => Interlocked.Increment(ref Count);
    }
}
