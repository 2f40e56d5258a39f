using System;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The machine's cache-line round trip between two CPUs (HostRoundTrip), recorded after every run's measured part: a
/// figure where two threads can be pinned to two CPUs, none where the process may use only one.
/// </summary>
public sealed class HostRoundTripTests
{
    [Fact]
    public void TheProbe_GivesAPositiveFigureWithinItsDeadline_OrNoneWithoutTwoCpus()
    {
        double? nanoseconds = HostRoundTrip.Measure();
        if (!OperatingSystem.IsLinux() || Environment.ProcessorCount < 2)
        {
            Assert.Null(nanoseconds);
            return;
        }
        // On a machine whose cores are all busy the other thread may not get its CPU before the deadline: then no
        // figure, never a late one.
        if (nanoseconds is { } value)
        {
            Assert.True(double.IsFinite(value) && value > 0, $"round trip {value} ns");
            Assert.True(value * HostRoundTrip.RoundTripsPerBurst < HostRoundTrip.Deadline.TotalNanoseconds, $"round trip {value} ns");
        }
    }

    [Fact]
    public void ACallerAllowedOneCpu_GetsNoFigure()
    {
        if (!OperatingSystem.IsLinux())
        {
            Assert.Null(HostRoundTrip.Measure());
            return;
        }
        double? nanoseconds = 0;
        bool pinned = false;
        // The probe reads the calling thread's CPUs (a child's main thread has the process's): a thread pinned to one.
        var caller = new Thread(() =>
        {
            pinned = HostRoundTrip.PinCallingThread(FirstCpu());
            nanoseconds = HostRoundTrip.Measure();
        });
        caller.Start();
        Assert.True(caller.Join(TimeSpan.FromSeconds(30)));
        Assert.True(pinned);
        Assert.Null(nanoseconds);
    }

    /// <summary>A CPU this process may run on: the one the calling thread runs on now.</summary>
    private static int FirstCpu() => Thread.GetCurrentProcessorId();
}
