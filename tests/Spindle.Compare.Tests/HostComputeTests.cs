using System;
using System.Threading;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>
/// The speed of the process's CPUs (HostCompute), recorded after every run's measured part: a figure on Linux, with two
/// CPUs or one, none elsewhere; the steps it times are fixed.
/// </summary>
public sealed class HostComputeTests
{
    [Fact]
    public void TheProbe_GivesAPositiveFigure_OnLinux()
    {
        double? nanoseconds = HostCompute.Measure();
        if (!OperatingSystem.IsLinux())
        {
            Assert.Null(nanoseconds);
            return;
        }
        // On a machine whose cores are all busy a burst may not finish before the deadline: then no figure, never a
        // late one.
        if (nanoseconds is { } value)
        {
            Assert.True(double.IsFinite(value) && value > 0, $"{value} ns per 1,000 steps");
            Assert.True(value * HostCompute.StepsPerBurst / 1_000 < HostCompute.Deadline.TotalNanoseconds, $"{value} ns per 1,000 steps");
        }
    }

    [Fact]
    public void ACallerAllowedOneCpu_StillGetsAFigure()
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }
        double? nanoseconds = null;
        bool pinned = false;
        var caller = new Thread(() =>
        {
            pinned = HostRoundTrip.PinCallingThread(Thread.GetCurrentProcessorId());
            // The probe's thread takes the caller's one CPU: retried, as a busy machine may hold it past the deadline.
            for (int attempt = 0; attempt < 20 && nanoseconds is null; attempt++)
            {
                nanoseconds = HostCompute.Measure();
            }
        });
        caller.Start();
        Assert.True(caller.Join(TimeSpan.FromSeconds(60)));
        Assert.True(pinned);
        Assert.NotNull(nanoseconds);
    }

    [Fact]
    public void TheSteps_AreFixed()
    {
        // Four xorshift32 sequences from 1, 1 ^ 0x9E3779B9, 1 ^ 0x85EBCA6B and 1 ^ 0xC2B2AE35, folded with exclusive or.
        Assert.Equal(3647872487u, HostCompute.Steps(1, 0));
        Assert.Equal(1082974542u, HostCompute.Steps(1, 1));
        Assert.Equal(1208790172u, HostCompute.Steps(1, 2));
        Assert.Equal(2054721797u, HostCompute.Steps(12345, 1_000));
    }
}
