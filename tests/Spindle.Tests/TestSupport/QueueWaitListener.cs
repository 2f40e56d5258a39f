using System.Diagnostics.Metrics;

namespace Spindle.Tests;

/// <summary>
/// A meter listener that turns the pool's queue-wait histogram on (and ignores what it records): while one is started,
/// the pools of the process wrap some enqueues in a timing sample.
/// </summary>
internal static class QueueWaitListener
{
    public static MeterListener Start()
    {
        var listener = new MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Spindle" && instrument.Name == "spindle.pool.work_item.wait.duration")
            {
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<double>((_, _, _, _) => { });
        listener.Start();
        return listener;
    }
}
