using System;
using System.Diagnostics.Tracing;
using System.Linq;
using System.Threading;
using Spindle.Tests.Telemetry;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// How the thread controller ramps when work starves: with the cores idle (the workers blocked), one step adds a thread
/// per waiting item. Runs alone (the process-wide collection): where the kernel cannot say what the workers do, the
/// controller also judges the process's CPU use, and other tests computing beside it would make the cores look busy.
/// </summary>
[Collection(ProcessWideMeasurementCollection.Name)]
public sealed class WorkerPoolRampTests
{
    /// <summary>
    /// Runs a small gated backlog on a throwaway pool first. The controller judges a stall in which the JIT took half
    /// the window as busy (a ramp from one, not a thread per item), and a test process whose first pool is this one
    /// compiles the items, the workers' paths and the injection itself inside that window.
    /// </summary>
    private static void WarmUpTheInjectionPaths()
    {
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = "ramp warm-up", MinThreads = 1 });
        int items = Environment.ProcessorCount + 4;
        using var gate = new ManualResetEventSlim();
        using var started = new CountdownEvent(items);
        using var done = new CountdownEvent(items);
        for (int i = 0; i < items; i++)
        {
            pool.UnsafeQueueUserWorkItem(_ =>
            {
                started.Signal();
                gate.Wait(Waits.MustHappen);
                done.Signal();
            }, null);
        }
        try
        {
            Waits.For(started, "the warm-up items to start");
        }
        finally
        {
            gate.Set();
        }
        Waits.For(done, "the warm-up items to finish");
    }

    [Fact]
    public void ABacklogBehindBlockedWorkers_WithTheCoresIdle_GetsAThreadPerWaitingItemInOneStep()
    {
        WarmUpTheInjectionPaths();
        AssertTheFirstStepCoversTheBacklog();
    }

    [Fact]
    public void ABacklogBehindBlockedWorkers_BesideThreadsComputingOutsideThePool_GetsAThreadPerWaitingItemInOneStep()
    {
        // Every core kept busy by threads of this process that are not the pool's (producers, say): the process's CPU
        // time reads as busy cores, but the workers are blocked, and the step is judged by the workers. The items wait
        // on a kernel event, which does not spin first: a worker spinning on its way into a wait (behind a spinner for a
        // whole slice, with the cores this busy) would be judged computing, and get a ramp (see StallMonitor).
        WarmUpTheInjectionPaths();
        int spinners = Environment.ProcessorCount;
        bool stop = false;
        var threads = Enumerable.Range(0, spinners).Select(i => new Thread(() =>
        {
            while (!Volatile.Read(ref stop))
            {
                Thread.SpinWait(100);
            }
        })
        { IsBackground = true, Name = $"outside spinner {i}" }).ToList();
        threads.ForEach(t => t.Start());
        try
        {
            AssertTheFirstStepCoversTheBacklog(kernelWait: true);
        }
        finally
        {
            Volatile.Write(ref stop, true);
            threads.ForEach(t => t.Join());
        }
    }

    [Fact]
    public void ABacklogBehindWorkersInManagedWaits_WhileTheJitCompilesOnAnotherThread_GetsAThreadPerWaitingItemInOneStep()
    {
        // The runtime's own time (JIT compilation, summed over threads) taking half the stall's window makes the stall
        // count as busy: workers held by the JIT's lock are not blocked in a wait of their own. Workers in managed waits
        // are, whatever another thread compiles meanwhile (the background compiler's tier-ups run for tens of
        // milliseconds after a busy start). A thread here compiles large methods back to back for the whole stall, and
        // the first step must still cover the backlog. The kernel wait's path is compiled before the compiler starts (a
        // worker compiling it is outside a managed wait, and rightly judged by the runtime's time), and the assertion
        // retries like its siblings: a worker descheduled on its way into the wait reads as computing, while the
        // judgement this test is about fails every attempt (the compiler keeps the runtime's time above half).
        WarmUpTheInjectionPaths();
        _ = FirstStarvationStep(maxThreads: 128, kernelWait: true);
        bool stop = false;
        long compiled = 0;
        var compiler = new Thread(() =>
        {
            while (!Volatile.Read(ref stop))
            {
                CompileALargeMethod();
                Interlocked.Increment(ref compiled);
            }
        })
        { IsBackground = true, Name = "JIT-busy thread" };
        compiler.Start();
        try
        {
            Waits.Until(() => Interlocked.Read(ref compiled) >= 3, "the compiling thread to get going");
            AssertTheFirstStepCoversTheBacklog(kernelWait: true);
        }
        finally
        {
            Volatile.Write(ref stop, true);
            compiler.Join();
        }
    }

    /// <summary>Builds and runs a method of a few thousand IL instructions, so that the JIT's time dominates the call.</summary>
    private static void CompileALargeMethod()
    {
        var method = new System.Reflection.Emit.DynamicMethod("large", typeof(int), [typeof(int)]);
        System.Reflection.Emit.ILGenerator il = method.GetILGenerator();
        for (int i = 0; i < 1_500; i++)
        {
            il.Emit(System.Reflection.Emit.OpCodes.Ldarg_0);
            il.Emit(System.Reflection.Emit.OpCodes.Ldc_I4, i * 7 + 1);
            il.Emit((i & 1) == 0 ? System.Reflection.Emit.OpCodes.Xor : System.Reflection.Emit.OpCodes.Add);
            il.Emit(System.Reflection.Emit.OpCodes.Starg_S, (byte)0);
        }
        il.Emit(System.Reflection.Emit.OpCodes.Ldarg_0);
        il.Emit(System.Reflection.Emit.OpCodes.Ret);
        var run = (Func<int, int>)method.CreateDelegate(typeof(Func<int, int>));
        GC.KeepAlive(run(1));
    }

    [Fact]
    public void AStarvationRamp_StartsItsThreadsOffTheThreadThatQueues()
    {
        // Once every worker of the target is blocked, the threads a starvation ramp adds are the stall monitor's and its
        // new workers' to start. An enqueue that started one itself waited for the start (a thread start returns once
        // the new thread runs) while the ramp was under way: the producer of a backlog paid for the ramp it caused.
        WarmUpTheInjectionPaths();
        int producer = Environment.CurrentManagedThreadId;
        // Who started each thread; the workers are told apart by their names ("<pool> #<n>"; the pool names its threads
        // after the factory returns), so that only worker starts count.
        var creators = new System.Collections.Concurrent.ConcurrentQueue<(int Creator, Thread Thread)>();
        int WorkersStartedByProducer() => creators.Count(c => c.Creator == producer && c.Thread.Name?.Contains(" #", StringComparison.Ordinal) == true);
        using var gate = new ManualResetEventSlim(); // disposed after the pool, whose disposal lets the items finish
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = nameof(AStarvationRamp_StartsItsThreadsOffTheThreadThatQueues),
            MinThreads = 1,
            MaxThreads = 256,
            ThreadFactory = (start, stackSize) =>
            {
                var thread = new Thread(start, stackSize);
                creators.Enqueue((Environment.CurrentManagedThreadId, thread));
                return thread;
            },
        });
        int cores = Environment.ProcessorCount;
        int started = 0;
        int finished = 0;
        WaitCallback item = _ =>
        {
            Interlocked.Increment(ref started);
            gate.WaitHandle.WaitOne(Waits.MustHappen);
            Interlocked.Increment(ref finished);
        };
        int queued = 0;
        try
        {
            // The pool's own threads, up to its target (the cores): the enqueues start them, as they should.
            for (int i = 0; i < cores; i++)
            {
                pool.UnsafeQueueUserWorkItem(item, null);
                queued++;
            }
            Waits.Until(() => Volatile.Read(ref started) >= cores, "the first items to block every worker");
            int startedByProducerBefore = WorkersStartedByProducer();
            // Then a backlog, queued one by one while the ramp answers it, until the ramp has added a few threads and
            // 50 ms after: each of these enqueues that found no worker free saw the pool below its raised target.
            var clock = System.Diagnostics.Stopwatch.StartNew();
            TimeSpan rampedAt = TimeSpan.Zero;
            while ((rampedAt == TimeSpan.Zero && clock.Elapsed < Waits.MustHappen) || (rampedAt != TimeSpan.Zero && clock.Elapsed - rampedAt < TimeSpan.FromMilliseconds(50)))
            {
                pool.UnsafeQueueUserWorkItem(item, null);
                queued++;
                Thread.SpinWait(20);
                if (rampedAt == TimeSpan.Zero && pool.ThreadCount >= cores + 8)
                {
                    rampedAt = clock.Elapsed;
                }
            }
            Assert.True(rampedAt != TimeSpan.Zero, $"the ramp to add threads ({pool.ThreadCount} threads after {queued} items)");
            Assert.Equal(startedByProducerBefore, WorkersStartedByProducer());
        }
        finally
        {
            gate.Set();
        }
        Waits.Until(() => Volatile.Read(ref finished) == queued, "every item to run once the gate opened");
    }

    private static void AssertTheFirstStepCoversTheBacklog(bool kernelWait = false)
    {
        // The controller judges a stall in which the runtime's own time (tiered compilation of the Debug build, a
        // collection) took half the window as busy, and this test process's leftovers (a previous test's threads
        // winding down) can cause that now and then: the stall then ramps from one, a judgement this test is not
        // about. So the scenario runs again on a fresh pool, up to three times, until one stall was judged with the
        // cores idle, and the step of that one is asserted.
        const int maxThreads = 128;
        var attempts = new System.Collections.Generic.List<(long Pending, int Added, int Threads)>();
        for (int attempt = 0; attempt < 3; attempt++)
        {
            (long pending, int added, int threads) = FirstStarvationStep(maxThreads, kernelWait);
            attempts.Add((pending, added, threads));
            Assert.True(pending > 0, $"pending {pending}");
            if (added > 1 || pending == 1)
            {
                break; // judged with the cores idle (a ramp from one adds a single thread)
            }
        }
        (long firstPending, int firstAdded, int firstThreads) = attempts[^1];
        // One step covers what was waiting (a ramp from one would have added a single thread here).
        Assert.True(Math.Min(firstPending, maxThreads - firstThreads) == firstAdded,
            "first starvation step per attempt (pending, added, threads): " + string.Join("; ", attempts));
    }

    /// <summary>
    /// Blocks every worker and a backlog of 40 behind a gate on a fresh pool (its kernel event, which waits without
    /// spinning first, when <paramref name="kernelWait"/>), and returns the first starvation step the
    /// pool traced: the items pending, the threads added and the threads there were.
    /// </summary>
    private static (long Pending, int Added, int Threads) FirstStarvationStep(int maxThreads, bool kernelWait)
    {
        string name = $"{nameof(WorkerPoolRampTests)}-{Guid.NewGuid():N}";
        using var listener = new EventSourceTests.Listener(name);
        using var pool = new WorkerPool(new WorkerPoolOptions
        {
            Name = name,
            MinThreads = 1,
            MaxThreads = maxThreads,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
        });
        const int backlog = 40;
        int blockers = Environment.ProcessorCount;
        using var gate = new ManualResetEventSlim();
        using var started = new CountdownEvent(blockers + backlog);
        try
        {
            for (int i = 0; i < blockers + backlog; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    started.Signal();
                    if (kernelWait)
                    {
                        gate.WaitHandle.WaitOne(Waits.MustHappen);
                    }
                    else
                    {
                        gate.Wait(Waits.MustHappen);
                    }
                });
            }
            Waits.For(started, "every blocking item to start, each on its own thread");
        }
        finally
        {
            gate.Set();
        }

        Waits.Until(() => listener.Events.Any(e => e.EventName == "StarvationDetected"), "the starvation traced");
        EventWrittenEventArgs first = listener.Events.First(e => e.EventName == "StarvationDetected");
        return ((long)listener.Payload(first, "PendingCount")!, (int)listener.Payload(first, "AddedThreads")!,
            (int)listener.Payload(first, "ThreadCount")!);
    }

    [Fact]
    public void AStarvationRamp_StopsOnceItemsComplete_InsteadOfStartingAThreadForEveryItemThatWaited()
    {
        // 2,000 items wait behind a gate that opens once a handful of them hold threads: the stall ends long before a
        // thread per waiting item could be started (each start takes a few hundred microseconds), and the items then
        // finish in well under a millisecond. The ramp must stop there, not go on to 2,000 threads.
        WarmUpTheInjectionPaths();
        using var pool = new WorkerPool(new WorkerPoolOptions { Name = nameof(AStarvationRamp_StopsOnceItemsComplete_InsteadOfStartingAThreadForEveryItemThatWaited), MinThreads = 1 });
        const int backlog = 2_000;
        int cores = Environment.ProcessorCount;
        int openAt = cores + 8;
        using var gate = new ManualResetEventSlim();
        using var done = new CountdownEvent(cores + backlog);
        int started = 0;
        WaitCallback item = _ =>
        {
            if (Interlocked.Increment(ref started) == openAt)
            {
                gate.Set();
            }
            gate.Wait(Waits.MustHappen);
            done.Signal();
        };
        // The workers blocked first, then the backlog queued at once: the controller sees idle cores behind a backlog,
        // the case in which it adds a thread per waiting item in one step.
        for (int i = 0; i < cores; i++)
        {
            pool.UnsafeQueueUserWorkItem(item, null);
        }
        Waits.Until(() => Volatile.Read(ref started) >= cores, "the first items to block every worker");
        for (int i = 0; i < backlog; i++)
        {
            pool.UnsafeQueueUserWorkItem(item, null);
        }

        int peak = 0;
        bool Sample()
        {
            peak = Math.Max(peak, pool.ThreadCount);
            return done.IsSet;
        }
        Waits.Until(Sample, "the items to finish once the gate opened");
        // And 300 ms beyond the drain: long enough for a ramp that went on to start hundreds more threads.
        Waits.Poll(() => !Sample(), TimeSpan.FromMilliseconds(300));
        // A few threads beyond those that held items when the gate opened (a thread start in flight, the workers that
        // continue the ramp); a ramp that went on started hundreds (290-460 on 2 cores).
        int bound = Math.Max(100, 4 * openAt);
        Assert.True(peak < bound, $"{peak} threads (bound {bound}) for a stall that ended after {openAt} items had started");
    }
}
