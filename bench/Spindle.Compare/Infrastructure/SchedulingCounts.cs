using System;
using System.Diagnostics.Metrics;
using System.Runtime.InteropServices;
using System.Threading;

namespace Spindle.Compare.Infrastructure;

/// <summary>
/// The scheduling decisions of a child run, counted so that a fast and a slow run of the same case can be told apart by
/// what happened in them: the process's context switches (<c>getrusage</c>, Linux and macOS: a voluntary switch is a
/// thread blocking, a park or a wait; an involuntary one is the kernel preempting a thread that could have run on),
/// and the parks, steals and thread starts of Spindle's pools, read from their meters (<c>spindle.pool.park.count</c>,
/// <c>spindle.pool.steal.count</c>, <c>spindle.pool.thread.added.count</c> summed over its reasons) as a monitoring agent
/// would. The built-in pool publishes none of them, so those three are unavailable for it.
/// </summary>
internal static partial class SchedulingCounts
{
    private const string MeterName = "Spindle";
    private const string ParkInstrument = "spindle.pool.park.count";
    private const string StealInstrument = "spindle.pool.steal.count";
    private const string ThreadsAddedInstrument = "spindle.pool.thread.added.count";

    private static readonly Lock s_lock = new();
    private static MeterListener? s_listener;

    // Sums of one RecordObservableInstruments call, under s_lock (the listener calls back on the recording thread).
    private static long s_parks;
    private static long s_steals;
    private static long s_threadsAdded;
    private static int s_poolInstruments;

    /// <summary>Counts at one moment; the pool figures are null when no Spindle pool publishes them.</summary>
    public readonly record struct Snapshot(long? VoluntarySwitches, long? InvoluntarySwitches, long? Parks, long? Steals, long? ThreadsAdded = null)
    {
        /// <summary>
        /// The counts between <paramref name="start"/> and <paramref name="end"/>: null where <paramref name="end"/> is;
        /// a pool figure that <paramref name="start"/> lacks counts from zero (the pool was created after it: a scenario
        /// that measures its pool's creation marks the start before the pool exists). The process's switches are null
        /// where either is.
        /// </summary>
        public static Snapshot operator -(Snapshot end, Snapshot start) => new(
            end.VoluntarySwitches - start.VoluntarySwitches,
            end.InvoluntarySwitches - start.InvoluntarySwitches,
            end.Parks - (start.Parks ?? 0),
            end.Steals - (start.Steals ?? 0),
            end.ThreadsAdded - (start.ThreadsAdded ?? 0));
    }

    /// <summary>Reads every count now.</summary>
    public static Snapshot Take()
    {
        (long? voluntary, long? involuntary) = ReadSwitches();
        lock (s_lock)
        {
            s_listener ??= StartListener();
            s_parks = 0;
            s_steals = 0;
            s_threadsAdded = 0;
            s_poolInstruments = 0;
            s_listener.RecordObservableInstruments();
            return s_poolInstruments == 0
                ? new Snapshot(voluntary, involuntary, null, null)
                : new Snapshot(voluntary, involuntary, s_parks, s_steals, s_threadsAdded);
        }
    }

    private static MeterListener StartListener()
    {
        var listener = new MeterListener
        {
            InstrumentPublished = static (instrument, listener) =>
            {
                if (instrument.Meter.Name == MeterName && instrument.Name is ParkInstrument or StealInstrument or ThreadsAddedInstrument)
                {
                    listener.EnableMeasurementEvents(instrument);
                }
            },
        };
        listener.SetMeasurementEventCallback<long>(static (instrument, value, _, _) =>
        {
            s_poolInstruments++;
            switch (instrument.Name)
            {
                case ParkInstrument:
                    s_parks += value;
                    break;
                case StealInstrument:
                    s_steals += value;
                    break;
                default:
                    s_threadsAdded += value; // one measurement per reason
                    break;
            }
        });
        listener.Start();
        return listener;
    }

    private static (long? Voluntary, long? Involuntary) ReadSwitches()
    {
        if (!(OperatingSystem.IsLinux() || OperatingSystem.IsMacOS()) || GetResourceUsage(RusageSelf, out ResourceUsage usage) != 0)
        {
            return (null, null);
        }
        return (usage.VoluntarySwitches, usage.InvoluntarySwitches);
    }

    private const int RusageSelf = 0;

    /// <summary><c>struct rusage</c> on 64-bit Linux and macOS: two <c>timeval</c>s, then fourteen <c>long</c>s.</summary>
    [StructLayout(LayoutKind.Sequential)]
    private struct ResourceUsage
    {
        public long UserSeconds;
        public long UserMicroseconds;
        public long SystemSeconds;
        public long SystemMicroseconds;
        public long MaxResidentSet;
        public long SharedMemory;
        public long UnsharedData;
        public long UnsharedStack;
        public long MinorFaults;
        public long MajorFaults;
        public long Swaps;
        public long BlockInputs;
        public long BlockOutputs;
        public long MessagesSent;
        public long MessagesReceived;
        public long Signals;
        public long VoluntarySwitches;
        public long InvoluntarySwitches;
    }

    [LibraryImport("libc", EntryPoint = "getrusage", SetLastError = true)]
    private static partial int GetResourceUsage(int who, out ResourceUsage usage);
}
