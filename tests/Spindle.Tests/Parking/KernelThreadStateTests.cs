using System;
using System.IO.Pipes;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Spindle.Primitives;
using Spindle.Threading;
using Xunit;

namespace Spindle.Tests.Parking;

/// <summary>
/// The kernel's word on whether a thread wants a CPU, which the stall monitor reads to tell blocked workers from
/// computing ones: a thread that computes is runnable, one blocked in a system call is waiting, a thread that is gone
/// is unknown.
/// </summary>
public sealed class KernelThreadStateTests
{
    [Theory]
    [InlineData("4242 (Spindle worker) R 1 2 3", "Runnable")]
    [InlineData("4242 (Spindle worker) S 1 2 3", "Waiting")]
    [InlineData("4242 (x) D 1", "Waiting")]
    [InlineData("4242 (a) b) R 1 2 3", "Runnable")] // a name with ") " in it: the last one closes it
    [InlineData("4242 (odd", "Unknown")]
    [InlineData("", "Unknown")]
    public void TheStateIsTheFirstCharacterAfterTheName(string stat, string expected)
    {
        Assert.Equal(expected, KernelThreadState.Parse(Encoding.ASCII.GetBytes(stat)).ToString());
    }

    [Fact]
    public void AThreadBlockedInASystemCall_Waits_AndOneThatComputes_IsRunnable()
    {
        if (!OperatingSystem.IsLinux())
        {
            Assert.False(KernelThreadState.IsAvailable);
            Assert.Equal(0, KernelThreadState.CurrentId());
            Assert.Equal(KernelThreadState.State.Unknown, KernelThreadState.Read(1));
            return;
        }
        Assert.True(KernelThreadState.IsAvailable);
        Assert.Equal(KernelThreadState.State.Runnable, KernelThreadState.Read(KernelThreadState.CurrentId()));

        // A read from a pipe nobody writes to blocks in the kernel, outside any managed wait.
        using var server = new AnonymousPipeServerStream(PipeDirection.Out);
        using var client = new AnonymousPipeClientStream(PipeDirection.In, server.ClientSafePipeHandle);
        int readerId = 0;
        using var idKnown = new ManualResetEventSlim();
        var reader = new Thread(() =>
        {
            readerId = KernelThreadState.CurrentId();
            idKnown.Set();
            client.ReadByte();
        })
        { IsBackground = true };
        reader.Start();
        Waits.For(idKnown, "the reader thread to start");
        // Before its read the thread still compiles and sets up the stream (runnable, or briefly waiting for a lock);
        // once it blocks in the read it reads as waiting at every look.
        Waits.Until(() => Enumerable.Range(0, 20).All(_ => KernelThreadState.Read(readerId) == KernelThreadState.State.Waiting),
            "the reader to block in its read");

        bool stop = false;
        int spinnerId = 0;
        var spinner = new Thread(() =>
        {
            Volatile.Write(ref spinnerId, KernelThreadState.CurrentId());
            while (!Volatile.Read(ref stop))
            {
                Thread.SpinWait(100);
            }
        })
        { IsBackground = true };
        spinner.Start();
        try
        {
            Waits.Until(() => Volatile.Read(ref spinnerId) != 0, "the spinner to start");
            // A computing thread is runnable whether it holds a CPU or waits in a run queue for one (a collection
            // suspends it now and then, so a single read may find it waiting for the collector).
            Waits.Until(() => KernelThreadState.Read(spinnerId) == KernelThreadState.State.Runnable, "the spinner to read as runnable");
        }
        finally
        {
            Volatile.Write(ref stop, true);
            spinner.Join();
            server.WriteByte(1);
            reader.Join();
        }
        Waits.Until(() => KernelThreadState.Read(spinnerId) == KernelThreadState.State.Unknown, "the exited thread to read as unknown");
    }

    [Fact]
    public void AWorker_PublishesItsKernelThreadId_BeforeItsFirstItem()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(KernelThreadStateTests), MinThreads = 1, MaxThreads = 1 });
        Task<(int Published, int Own)> seen = pool.Run(static () => (Spindle.Scheduling.Worker.Current!.Record.KernelThreadId, KernelThreadState.CurrentId()));
        Assert.True(seen.Wait(Waits.MustHappen), "the item did not run");
        // What the stall monitor reads a worker's state by: the worker's own id to the kernel (0 where there is none).
        Assert.Equal(seen.Result.Own, seen.Result.Published);
        Assert.Equal(OperatingSystem.IsLinux(), seen.Result.Published != 0);
    }

    [Theory]
    [InlineData(1, 1)]
    [InlineData(2, 1)]
    [InlineData(16, 15)]
    public void CoresCountAsBusy_WhenAllButOneHaveARunnableWorker(int cores, int needed)
    {
        Assert.Equal(needed, StallMonitor.RunnableWorkersForBusyCores(cores));
    }
}
