using System;
using System.Diagnostics;
using System.Text;
using System.Threading;
using Spindle.Primitives;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// <see cref="OtherProcessesLoad"/>: the busy time of /proc/stat's first line, other processes' busy cores as the
/// machine's busy time less the process's own, the verdict's hysteresis, and a real process spinning beside the test
/// seen as sharing the cores.
/// </summary>
public sealed class OtherProcessesLoadTests
{
    [Fact]
    public void TheFirstLine_CountsUserNiceSystemIrqAndSoftirq_NotIdleIowaitOrSteal()
    {
        byte[] text = Encoding.ASCII.GetBytes(
            "cpu  1000 20 300 99999 400 5 6 777 0 0\ncpu0 500 10 150 50000 200 2 3 300 0 0\nintr 1 2 3\n");
        Assert.True(OtherProcessesLoad.TryParseBusySeconds(text, out double seconds));
        Assert.Equal((1000 + 20 + 300 + 5 + 6) / 100.0, seconds, precision: 9);
    }

    [Theory]
    [InlineData("cpu0 1 2 3 4 5 6 7\n")]
    [InlineData("intr 1 2 3\n")]
    [InlineData("cpu  1 2 3 4 5\n")]
    [InlineData("cpu  1 2 x 4 5 6 7\n")]
    [InlineData("")]
    public void AnythingButACompleteCpuLine_IsRejected(string text)
    {
        Assert.False(OtherProcessesLoad.TryParseBusySeconds(Encoding.ASCII.GetBytes(text), out _));
    }

    [Fact]
    public void OtherProcessesBusyCores_AreTheMachinesBusyTimeLessOurs_OverTheWallTime()
    {
        Assert.Equal(1.5, OtherProcessesLoad.OtherBusyCores(machineBusySeconds: 0.4, processSeconds: 0.1, wallSeconds: 0.2), precision: 9);
        // Our own time counted after the machine's read (the two reads are not atomic) never makes the others negative.
        Assert.Equal(0, OtherProcessesLoad.OtherBusyCores(machineBusySeconds: 0.1, processSeconds: 0.12, wallSeconds: 0.1));
        Assert.Equal(0, OtherProcessesLoad.OtherBusyCores(machineBusySeconds: 1, processSeconds: 0, wallSeconds: 0));
    }

    [Fact]
    public void TheVerdict_TurnsSharedAtHalfACore_AndFreeAgainOnlyBelowAQuarter()
    {
        Assert.False(OtherProcessesLoad.Judge(wasShared: false, OtherProcessesLoad.SharedAbove - 0.01));
        Assert.True(OtherProcessesLoad.Judge(wasShared: false, OtherProcessesLoad.SharedAbove));
        Assert.True(OtherProcessesLoad.Judge(wasShared: true, OtherProcessesLoad.FreeBelow));
        Assert.False(OtherProcessesLoad.Judge(wasShared: true, OtherProcessesLoad.FreeBelow - 0.01));
    }

    [Fact]
    public void AProcessSpinningBesideThisOne_IsSeenAsSharingTheCores_OnLinux()
    {
        var load = new OtherProcessesLoad();
        if (!OperatingSystem.IsLinux())
        {
            Assert.False(load.CoresShared()); // nothing to read elsewhere: never shared
            return;
        }
        using var burner = Process.Start(new ProcessStartInfo("sh", ["-c", "while :; do :; done"]) { UseShellExecute = false })!;
        try
        {
            // A sample every 100 ms at most; a core kept busy for whole windows is far above half a core.
            var deadline = Stopwatch.StartNew();
            bool shared = false;
            while (!shared && deadline.Elapsed < TimeSpan.FromSeconds(30))
            {
                shared = load.CoresShared();
                Thread.Sleep(20);
            }
            Assert.True(shared, "A busy loop in another process was not seen within 30 s.");
        }
        finally
        {
            burner.Kill();
            burner.WaitForExit();
        }
    }
}
