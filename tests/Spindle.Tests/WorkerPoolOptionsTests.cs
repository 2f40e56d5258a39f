using System;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

/// <summary>Options: defaults, validation with the right exception and parameter name, and copying.</summary>
public sealed class WorkerPoolOptionsTests
{
    private static WorkerPoolOptions Valid() => new() { ExceptionPolicy = UnhandledExceptionPolicy.Report };

    [Fact]
    public void Defaults_AreDocumented()
    {
        var options = new WorkerPoolOptions();
        Assert.Equal("Spindle", options.Name);
        Assert.Equal(Environment.ProcessorCount, options.MinThreads);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, options.MaxThreads);
        Assert.Equal(32767, WorkerPoolOptions.MaxThreadLimit);
        Assert.True(options.FlowExecutionContext);
        Assert.Null(options.ThreadNamePrefix);
        Assert.Equal(0, options.StackSize);
        Assert.True(options.UseBackgroundThreads);
        Assert.Null(options.OnWorkerStarted);
        Assert.Null(options.OnWorkerStopping);
        Assert.Equal(UnhandledExceptionPolicy.FailProcess, options.ExceptionPolicy);
        Assert.Equal(TimeSpan.FromMicroseconds(20), options.OutsideWorkReliefDelay);
    }

    [Fact]
    public void DefaultConstructor_CreatesAPoolWithDefaultOptions()
    {
        using var pool = new WorkerPool();
        Assert.Equal("Spindle", pool.Name);
        Assert.Equal(Environment.ProcessorCount, pool.MinThreads);
        Assert.Equal(WorkerPoolOptions.MaxThreadLimit, pool.MaxThreads);
        Assert.True(pool.FlowsExecutionContext);
        Assert.Equal(UnhandledExceptionPolicy.FailProcess, pool.ExceptionPolicy);
        Assert.Equal(0, pool.ThreadCount);
        Assert.Contains("Spindle", pool.ToString(), StringComparison.Ordinal);
    }

    [Fact]
    public void NullOptions_Throw()
    {
        var e = Assert.Throws<ArgumentNullException>(() => new WorkerPool(null!));
        Assert.Equal("options", e.ParamName);
    }

    [Fact]
    public void NullName_Throws()
    {
        WorkerPoolOptions options = Valid();
        options.Name = null!;
        var e = Assert.Throws<ArgumentNullException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.Name), e.ParamName);
    }

    [Fact]
    public void EmptyName_Throws()
    {
        WorkerPoolOptions options = Valid();
        options.Name = "";
        var e = Assert.Throws<ArgumentException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.Name), e.ParamName);
    }

    [Fact]
    public void EmptyThreadNamePrefix_Throws()
    {
        WorkerPoolOptions options = Valid();
        options.ThreadNamePrefix = "";
        var e = Assert.Throws<ArgumentException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.ThreadNamePrefix), e.ParamName);
    }

    [Theory]
    [InlineData(-1, 4, nameof(WorkerPoolOptions.MinThreads))]
    [InlineData(int.MinValue, 4, nameof(WorkerPoolOptions.MinThreads))]
    [InlineData(0, 0, nameof(WorkerPoolOptions.MaxThreads))]
    [InlineData(0, -5, nameof(WorkerPoolOptions.MaxThreads))]
    [InlineData(3, 2, nameof(WorkerPoolOptions.MinThreads))] // min > max
    [InlineData(WorkerPoolOptions.MaxThreadLimit + 1, WorkerPoolOptions.MaxThreadLimit, nameof(WorkerPoolOptions.MinThreads))]
    [InlineData(WorkerPoolOptions.MaxThreadLimit + 1, WorkerPoolOptions.MaxThreadLimit + 1, nameof(WorkerPoolOptions.MinThreads))]
    [InlineData(int.MaxValue, int.MaxValue, nameof(WorkerPoolOptions.MinThreads))]
    public void ThreadCountsOutOfRange_Throw(int min, int max, string paramName)
    {
        WorkerPoolOptions options = Valid();
        options.MinThreads = min;
        options.MaxThreads = max;
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(paramName, e.ParamName);
    }

    [Theory]
    [InlineData(0, 1)]
    [InlineData(1, 1)]
    [InlineData(0, WorkerPoolOptions.MaxThreadLimit)]
    [InlineData(WorkerPoolOptions.MaxThreadLimit, WorkerPoolOptions.MaxThreadLimit)]
    public void ThreadCountsAtTheLimits_AreAccepted(int min, int max)
    {
        WorkerPoolOptions options = Valid();
        options.MinThreads = min;
        options.MaxThreads = max;
        using var pool = new WorkerPool(options);
        Assert.Equal(min, pool.MinThreads);
        Assert.Equal(max, pool.MaxThreads);
        Assert.Equal(0, pool.ThreadCount); // lazily created, even with a large minimum
    }

    [Theory]
    [InlineData(1)]
    [InlineData(4096)]
    [InlineData(64 * 1024 - 1)]
    [InlineData(-1)]
    [InlineData(int.MinValue)]
    public void StackSizeOutOfRange_Throws(int stackSize)
    {
        WorkerPoolOptions options = Valid();
        options.StackSize = stackSize;
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.StackSize), e.ParamName);
    }

    [Theory]
    [InlineData(0)]
    [InlineData(64 * 1024)]
    [InlineData(1024 * 1024)]
    public void ValidStackSize_IsAccepted_AndWorkersRun(int stackSize)
    {
        WorkerPoolOptions options = Valid();
        options.StackSize = stackSize;
        options.MaxThreads = 1;
        options.MinThreads = 1;
        using var pool = new WorkerPool(options);
        using var ran = new ManualResetEventSlim();
        pool.QueueUserWorkItem(static s => ((ManualResetEventSlim)s!).Set(), ran);
        Waits.For(ran, "an item on a pool with a custom stack size");
    }

    [Theory]
    [InlineData(2)]
    [InlineData(-1)]
    [InlineData(int.MaxValue)]
    public void UndefinedExceptionPolicy_Throws(int value)
    {
        WorkerPoolOptions options = Valid();
        options.ExceptionPolicy = (UnhandledExceptionPolicy)value;
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.ExceptionPolicy), e.ParamName);
    }

    [Fact]
    public void Options_AreCopied_SoLaterChangesHaveNoEffect()
    {
        int originalHookRuns = 0, replacedHookRuns = 0;
        var options = new WorkerPoolOptions
        {
            Name = "Original",
            ThreadNamePrefix = "OriginalPrefix",
            MinThreads = 1,
            MaxThreads = 1,
            FlowExecutionContext = false,
            UseBackgroundThreads = true,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnWorkerStarted = () => Interlocked.Increment(ref originalHookRuns),
        };
        using var pool = new WorkerPool(options);

        options.Name = "Changed";
        options.ThreadNamePrefix = "ChangedPrefix";
        options.MinThreads = 0;
        options.MaxThreads = 8;
        options.FlowExecutionContext = true;
        options.UseBackgroundThreads = false;
        options.ExceptionPolicy = UnhandledExceptionPolicy.FailProcess;
        options.OnWorkerStarted = () => Interlocked.Increment(ref replacedHookRuns);

        Assert.Equal("Original", pool.Name);
        Assert.Equal(1, pool.MinThreads);
        Assert.Equal(1, pool.MaxThreads);
        Assert.False(pool.FlowsExecutionContext);
        Assert.Equal(UnhandledExceptionPolicy.Report, pool.ExceptionPolicy);

        string? threadName = null;
        bool isBackground = false;
        using var ran = new CountdownEvent(2);
        pool.QueueUserWorkItem(_ =>
        {
            threadName = Thread.CurrentThread.Name;
            isBackground = Thread.CurrentThread.IsBackground;
            ran.Signal();
        });
        // The copied policy (Report) applies: a throwing item does not take the test host down.
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("reported, not fatal"));
        pool.QueueUserWorkItem(_ => ran.Signal());
        Waits.For(ran, "items on a pool whose options were changed afterwards");

        Assert.Equal("OriginalPrefix #1", threadName);
        Assert.True(isBackground);
        Assert.Equal(1, Volatile.Read(ref originalHookRuns));
        Assert.Equal(0, Volatile.Read(ref replacedHookRuns));
        Assert.Equal(1, pool.ThreadCount);
    }

    [Fact]
    public void ThreadNames_UseThePrefix_OrElseThePoolName()
    {
        string? named = null, prefixed = null;
        using (var pool = new WorkerPool(new WorkerPoolOptions { Name = "Alpha", MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report }))
        {
            using var ran = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ =>
            {
                named = Thread.CurrentThread.Name;
                ran.Set();
            });
            Waits.For(ran, "an item");
        }
        using (var pool = new WorkerPool(new WorkerPoolOptions { Name = "Beta", ThreadNamePrefix = "Gamma", MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report }))
        {
            using var ran = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ =>
            {
                prefixed = Thread.CurrentThread.Name;
                ran.Set();
            });
            Waits.For(ran, "an item");
        }
        Assert.Equal("Alpha #1", named);
        Assert.Equal("Gamma #1", prefixed);
    }

    [Fact]
    public void ForegroundWorkers_AreForegroundThreads_AndStopOnDispose()
    {
        bool isBackground = true;
        var pool = new WorkerPool(new WorkerPoolOptions { UseBackgroundThreads = false, MinThreads = 1, MaxThreads = 1, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using (pool)
        {
            using var ran = new ManualResetEventSlim();
            pool.QueueUserWorkItem(_ =>
            {
                isBackground = Thread.CurrentThread.IsBackground;
                ran.Set();
            });
            Waits.For(ran, "an item on foreground workers");
        }
        Assert.False(isBackground);
        Assert.Equal(0, pool.ThreadCount);
    }

    [Fact]
    public void WorkerHooks_RunOncePerWorker_OnTheWorker()
    {
        int started = 0, stopping = 0;
        var startedThreads = new System.Collections.Concurrent.ConcurrentDictionary<int, bool>();
        var stoppingThreads = new System.Collections.Concurrent.ConcurrentDictionary<int, bool>();
        var itemThreads = new System.Collections.Concurrent.ConcurrentDictionary<int, bool>();
        var pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 2,
            MaxThreads = 2,
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnWorkerStarted = () =>
            {
                Interlocked.Increment(ref started);
                startedThreads[Environment.CurrentManagedThreadId] = true;
            },
            OnWorkerStopping = () =>
            {
                Interlocked.Increment(ref stopping);
                stoppingThreads[Environment.CurrentManagedThreadId] = true;
            },
        });
        using (pool)
        {
            // Two items that wait for each other make both workers exist.
            using var both = new CountdownEvent(2);
            for (int i = 0; i < 2; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    itemThreads[Environment.CurrentManagedThreadId] = true;
                    both.Signal();
                    both.Wait(Waits.MustHappen);
                });
            }
            Waits.For(both, "both workers");
        }
        Assert.Equal(2, started);
        Assert.Equal(2, stopping);
        Assert.Equal(itemThreads.Keys.Order(), startedThreads.Keys.Order());
        Assert.Equal(itemThreads.Keys.Order(), stoppingThreads.Keys.Order());
    }

    [Fact]
    public void WorkQueuedByTheStopHookOfARetiringWorker_StillRuns()
    {
        var queued = new System.Collections.Concurrent.ConcurrentQueue<Task>();
        WorkerPool? pool = null;
        pool = new WorkerPool(new WorkerPoolOptions
        {
            MinThreads = 1,
            MaxThreads = 4,
            IdleTimeout = TimeSpan.FromMilliseconds(20),
            ExceptionPolicy = UnhandledExceptionPolicy.Report,
            OnWorkerStopping = () =>
            {
                // A retiring worker has already left the pool's list of workers: work it queues must not go to its
                // own local queue, where nobody would ever look (Run prefers the calling worker's queue).
                if (!pool!.IsShutdownStarted)
                {
                    queued.Enqueue(pool.Run(static () => { }));
                }
            },
        });
        using (pool)
        {
            // Items that block inside blocking regions make the pool add threads; idle, the extra ones retire.
            using var release = new ManualResetEventSlim();
            using var blocked = new CountdownEvent(3);
            for (int i = 0; i < 3; i++)
            {
                pool.QueueUserWorkItem(_ =>
                {
                    using (WorkerPool.EnterBlockingRegion())
                    {
                        blocked.Signal();
                        release.Wait(Waits.MustHappen);
                    }
                });
            }
            Waits.For(blocked, "three blocked items, each on its own worker");
            release.Set();
            Waits.Until(() => !queued.IsEmpty && pool.ThreadCount == 1, "the extra workers to retire");
            foreach (Task task in queued)
            {
                Assert.True(task.Wait(Waits.MustHappen), "an item queued by a retiring worker's stop hook ran");
            }
        }
    }

    [Theory]
    [InlineData(0)]
    [InlineData(-5)]
    [InlineData(0.5)]
    [InlineData(3e9)]
    public void IdleTimeout_OutOfRange_IsRejected(double milliseconds)
    {
        var options = new WorkerPoolOptions { IdleTimeout = TimeSpan.FromMilliseconds(milliseconds) };
        var exception = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.IdleTimeout), exception.ParamName);
    }

    [Fact]
    public void IdleTimeout_DefaultsTo20Seconds_AndAcceptsInfinite()
    {
        Assert.Equal(TimeSpan.FromSeconds(20), new WorkerPoolOptions().IdleTimeout);
        using var pool = new WorkerPool(new WorkerPoolOptions { IdleTimeout = System.Threading.Timeout.InfiniteTimeSpan });
        Assert.Equal(System.Threading.Timeout.InfiniteTimeSpan, pool.IdleTimeout);
        using var short1 = new WorkerPool(new WorkerPoolOptions { IdleTimeout = TimeSpan.FromMilliseconds(1) });
        Assert.Equal(TimeSpan.FromMilliseconds(1), short1.IdleTimeout);
    }

    [Theory]
    [InlineData(0)]
    [InlineData(-1)]
    [InlineData(0.5)]
    [InlineData(1_000_001)]
    public void OutsideWorkReliefDelay_OutOfRange_IsRejected(double microseconds)
    {
        var options = new WorkerPoolOptions { OutsideWorkReliefDelay = TimeSpan.FromMicroseconds(microseconds) };
        var exception = Assert.Throws<ArgumentOutOfRangeException>(() => new WorkerPool(options));
        Assert.Equal(nameof(WorkerPoolOptions.OutsideWorkReliefDelay), exception.ParamName);
    }

    [Fact]
    public void OutsideWorkReliefDelay_AcceptsItsLimits_AndInfinite()
    {
        foreach (TimeSpan delay in new[] { TimeSpan.FromMicroseconds(1), TimeSpan.FromSeconds(1), System.Threading.Timeout.InfiniteTimeSpan })
        {
            using var pool = new WorkerPool(new WorkerPoolOptions { OutsideWorkReliefDelay = delay });
            Assert.Equal(0, pool.ThreadCount);
        }
    }
}
