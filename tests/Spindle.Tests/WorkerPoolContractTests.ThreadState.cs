using System.Collections.Generic;
using System;
using System.Globalization;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

// Worker state is reset between items; ExecutionContext flows through the safe methods only, and not when the pool
// or the caller turns flow off.
public abstract partial class WorkerPoolContractTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    /// <summary>What an item saw of its thread.</summary>
    private sealed class ThreadObservation
    {
        public int ThreadId;
        public string? Name;
        public CultureInfo? Culture;
        public CultureInfo? UICulture;
        public string? AsyncLocalValue;
        public ThreadPriority Priority;
        public bool IsBackground;
        public SynchronizationContext? SynchronizationContext;
        public bool FlowSuppressed;

        public static ThreadObservation OfCurrentThread()
        {
            Thread thread = Thread.CurrentThread;
            return new ThreadObservation
            {
                ThreadId = thread.ManagedThreadId,
                Name = thread.Name,
                Culture = CultureInfo.CurrentCulture,
                UICulture = CultureInfo.CurrentUICulture,
                AsyncLocalValue = s_flowed.Value,
                Priority = thread.Priority,
                IsBackground = thread.IsBackground,
                SynchronizationContext = SynchronizationContext.Current,
                FlowSuppressed = ExecutionContext.IsFlowSuppressed(),
            };
        }
    }

    /// <summary>Queues <paramref name="body"/> (flowing or not) and waits until it has run.</summary>
    private static void RunOnPool(WorkerPool pool, bool safe, Action body)
    {
        using var done = new ManualResetEventSlim();
        WaitCallback callback = _ =>
        {
            try
            {
                body();
            }
            finally
            {
                done.Set();
            }
        };
        if (safe)
        {
            pool.QueueUserWorkItem(callback, null);
        }
        else
        {
            pool.UnsafeQueueUserWorkItem(callback, null);
        }
        Waits.For(done, "the item");
    }

    // ---- Worker state is reset between items ----------------------------------------------------------------

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void WorkerState_IsResetBetweenItems(bool safeQueueing)
    {
        using WorkerPool pool = CreatePool(threads: 1);
        ThreadObservation? before = null;
        ThreadObservation? after = null;

        RunOnPool(pool, safeQueueing, () =>
        {
            before = ThreadObservation.OfCurrentThread();
            Thread thread = Thread.CurrentThread;
            thread.Name = "renamed by an item";
            CultureInfo.CurrentCulture = (CultureInfo)CultureInfo.InvariantCulture.Clone();
            CultureInfo.CurrentUICulture = (CultureInfo)CultureInfo.InvariantCulture.Clone();
            s_flowed.Value = "left behind by an item";
            thread.Priority = ThreadPriority.Lowest;
            thread.IsBackground = false;
            SynchronizationContext.SetSynchronizationContext(new SynchronizationContext());
            ExecutionContext.SuppressFlow(); // and never restored
        });
        RunOnPool(pool, safeQueueing, () => after = ThreadObservation.OfCurrentThread());

        Assert.NotNull(before);
        Assert.NotNull(after);
        Assert.Equal(before.ThreadId, after.ThreadId); // one worker, or the test proves nothing
        Assert.Equal(before.Name, after.Name);
        Assert.StartsWith(pool.Name + " #", after.Name, StringComparison.Ordinal);
        Assert.Same(before.Culture, after.Culture);
        Assert.Same(before.UICulture, after.UICulture);
        Assert.Null(after.AsyncLocalValue);
        Assert.Equal(ThreadPriority.Normal, after.Priority);
        Assert.True(after.IsBackground);
        Assert.Null(after.SynchronizationContext);
        Assert.False(after.FlowSuppressed);
    }

    [Fact]
    public void AfterAnItemChangesItsContextOrCulture_TheNextItemsRunInTheThreadsOwnDefaultContext()
    {
        using WorkerPool pool = CreatePool(threads: 1);
        var contexts = new List<ExecutionContext?>();
        var cultures = new List<CultureInfo>();
        RunOnPool(pool, safe: false, () => { contexts.Add(ExecutionContext.Capture()); cultures.Add(CultureInfo.CurrentCulture); });
        RunOnPool(pool, safe: false, () =>
        {
            s_flowed.Value = "left behind by an item";
            CultureInfo.CurrentCulture = (CultureInfo)CultureInfo.InvariantCulture.Clone();
        });
        for (int i = 0; i < 3; i++)
        {
            // Unsafe queueing: each item runs in whatever context the thread is in between items.
            RunOnPool(pool, safe: false, () => { contexts.Add(ExecutionContext.Capture()); cultures.Add(CultureInfo.CurrentCulture); });
        }

        Assert.Equal(4, contexts.Count);
        Assert.All(contexts, context => Assert.Same(contexts[0], context)); // the reset leaves no context of its own behind
        Assert.All(cultures, culture => Assert.Same(cultures[0], culture));
    }

    [Theory]
    [InlineData("name", true)]
    [InlineData("priority", true)]
    [InlineData("background", true)]
    [InlineData("name", false)]
    [InlineData("priority", false)]
    [InlineData("background", false)]
    public void EachIdentityChange_IsResetAlone_AndTheItemsAfterTheResetSeeThePoolsValues(string change, bool backgroundThreads)
    {
        using WorkerPool pool = CreatePool(threads: 1, configure: o => o.UseBackgroundThreads = backgroundThreads);
        var seen = new List<ThreadObservation>();
        RunOnPool(pool, safe: false, () =>
        {
            seen.Add(ThreadObservation.OfCurrentThread());
            Thread thread = Thread.CurrentThread;
            switch (change)
            {
                case "name":
                    thread.Name = "renamed by an item";
                    break;
                case "priority":
                    thread.Priority = ThreadPriority.AboveNormal;
                    break;
                default:
                    thread.IsBackground = !thread.IsBackground;
                    break;
            }
        });
        // The reset itself sets the name and background state again: the items after it must not be reset for that.
        for (int i = 0; i < 3; i++)
        {
            RunOnPool(pool, safe: false, () => seen.Add(ThreadObservation.OfCurrentThread()));
        }

        Assert.Equal(4, seen.Count);
        foreach (ThreadObservation observed in seen)
        {
            Assert.Equal(seen[0].ThreadId, observed.ThreadId); // one worker, or the test proves nothing
            Assert.Equal(seen[0].Name, observed.Name);
            Assert.Equal(ThreadPriority.Normal, observed.Priority);
            Assert.Equal(backgroundThreads, observed.IsBackground);
        }
    }

    // ---- ExecutionContext flow ---------------------------------------------------------------------------------

    [Fact]
    public void ExecutionContext_FlowsThroughTheSafeMethods_AndNotThroughTheUnsafeOnes()
    {
        using WorkerPool pool = CreatePool();
        Assert.True(pool.FlowsExecutionContext);
        string?[] seen = ObserveFlowFromCaller(pool);
        Assert.All(seen[..5], value => Assert.Equal("caller", value));
        Assert.All(seen[5..], Assert.Null);
    }

    [Fact]
    public void ExecutionContext_DoesNotFlow_WhenThePoolIsConfiguredNotTo()
    {
        using WorkerPool pool = CreatePool(configure: o => o.FlowExecutionContext = false);
        Assert.False(pool.FlowsExecutionContext);
        string?[] seen = ObserveFlowFromCaller(pool);
        Assert.All(seen, Assert.Null);
    }

    [Fact]
    public void ExecutionContext_DoesNotFlow_WhenTheCallerSuppressedFlow()
    {
        using WorkerPool pool = CreatePool();
        string?[] seen = ObserveFlowFromCaller(pool, suppressFlow: true);
        Assert.All(seen, Assert.Null);
    }

    /// <summary>
    /// From a fresh thread carrying an AsyncLocal value, queues one observer through each method; returns what each saw:
    /// five safe methods first, then four unsafe ones.
    /// </summary>
    private static string?[] ObserveFlowFromCaller(WorkerPool pool, bool suppressFlow = false)
    {
        var seen = new string?[9];
        for (int i = 0; i < seen.Length; i++)
        {
            seen[i] = "not run";
        }
        using var done = new CountdownEvent(seen.Length);
        Waits.RunBounded(() =>
        {
            s_flowed.Value = "caller";
            AsyncFlowControl? suppression = suppressFlow ? ExecutionContext.SuppressFlow() : null;
            void Observe(int slot)
            {
                seen[slot] = s_flowed.Value;
                done.Signal();
            }
            pool.QueueUserWorkItem(_ => Observe(0));
            pool.QueueUserWorkItem(_ => Observe(1), null);
            pool.QueueUserWorkItem(Observe, 2, preferLocal: false);
            pool.QueueUserWorkItem(Observe, 3, preferLocal: true);
            pool.QueueUserWorkItem(o => Observe((int)o!), (object)4, preferLocal: false);
            pool.UnsafeQueueUserWorkItem(_ => Observe(5), null);
            pool.UnsafeQueueUserWorkItem(Observe, 6, preferLocal: false);
            pool.UnsafeQueueUserWorkItem(o => Observe((int)o!), (object)7, preferLocal: true);
            pool.UnsafeQueueUserWorkItem(new ObserverItem(() => Observe(8)), preferLocal: false);
            suppression?.Undo();
        }, "queueing from a thread with an AsyncLocal value");
        Waits.For(done, "the observers");
        return seen;
    }

    private sealed class ObserverItem(Action action) : IWorkItem
    {
        public void Execute() => action();
    }

    [Fact]
    public void ExecutionContext_FlowsFromAWorkItemToTheItemsItQueues()
    {
        using WorkerPool pool = CreatePool();
        string? local = "not run", global = "not run", unsafeLocal = "not run";
        using var done = new CountdownEvent(3);
        pool.UnsafeQueueUserWorkItem(_ =>
        {
            s_flowed.Value = "inner";
            pool.QueueUserWorkItem(__ =>
            {
                local = s_flowed.Value;
                done.Signal();
            }, null);
            pool.QueueUserWorkItem<object?>(__ =>
            {
                global = s_flowed.Value;
                done.Signal();
            }, null, preferLocal: false);
            pool.UnsafeQueueUserWorkItem(__ =>
            {
                unsafeLocal = s_flowed.Value;
                done.Signal();
            }, null);
        }, null);
        Waits.For(done, "items queued from a work item");
        Assert.Equal("inner", local);
        Assert.Equal("inner", global);
        Assert.Null(unsafeLocal);
    }

    [Fact]
    public void CreatingAWorker_DoesNotCaptureTheCreatorsContext()
    {
        using WorkerPool pool = CreatePool(threads: 1);
        string? firstUnsafe = "not run", firstSafe = "not run", later = "not run";

        // The first enqueue creates the worker, on a thread carrying an AsyncLocal value.
        Waits.RunBounded(() =>
        {
            s_flowed.Value = "creator";
            RunOnPool(pool, safe: false, () => firstUnsafe = s_flowed.Value);
            RunOnPool(pool, safe: true, () => firstSafe = s_flowed.Value);
        }, "the creating thread");
        // A later unsafe item, queued from a thread without the value, runs on the same worker.
        Waits.RunBounded(() => RunOnPool(pool, safe: false, () => later = s_flowed.Value), "a clean thread");

        Assert.Null(firstUnsafe);
        Assert.Equal("creator", firstSafe);
        Assert.Null(later);
    }

    [Fact]
    public void WorkerPoolCurrent_IsThePoolOnItsWorkers_AndNullElsewhere()
    {
        using WorkerPool pool = CreatePool();
        WorkerPool? inside = null;
        RunOnPool(pool, safe: true, () => inside = WorkerPool.Current);
        Assert.Same(pool, inside);
        Assert.Null(WorkerPool.Current);
    }
}
