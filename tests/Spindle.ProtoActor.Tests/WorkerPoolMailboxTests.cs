using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Channels;
using System.Threading.Tasks;
using Proto;
using Proto.Mailbox;
using Xunit;

namespace Spindle.ProtoActor.Tests;

/// <summary>
/// The mailbox's contract with a hand-driven dispatcher and invoker: one run at a time, scheduled with the same
/// delegate every time, system messages first, the throughput honoured, suspension, failures escalated, asynchronous
/// handlers awaited, batches unpacked, the statistics hooks told, and bad input rejected before anything is queued.
/// </summary>
public sealed class WorkerPoolMailboxTests
{
    private sealed record Batch(IReadOnlyCollection<object> Messages) : IMessageBatch
    {
        public IReadOnlyCollection<object> GetMessages() => Messages;
    }

    private sealed record RespondingBatch(IReadOnlyCollection<object> Messages) : IMessageBatch, IAutoRespond
    {
        public IReadOnlyCollection<object> GetMessages() => Messages;

        public object GetAutoResponse(IContext context) => "done";
    }

    /// <summary>Keeps the runs it is given, for the test to run one at a time.</summary>
    private sealed class ManualDispatcher(int throughput) : IDispatcher
    {
        public List<Func<Task>> Runs { get; } = [];

        public int Throughput => throughput;

        public void Schedule(Func<Task> runner) => Runs.Add(runner);

        /// <summary>Runs the oldest scheduled run that has not run yet and returns its task.</summary>
        public Task RunNext(ref int next) => Runs[next++]();
    }

    /// <summary>Records what it handles; a message may be set up to throw or to finish later.</summary>
    private sealed class RecordingInvoker : IMessageInvoker
    {
        public List<object> Handled { get; } = [];

        public List<(Exception Reason, object? Message)> Escalated { get; } = [];

        public Dictionary<object, Task> Results { get; } = [];

        public object? Throws { get; set; }

        public CancellationTokenSource? CancellationTokenSource { get; } = new();

        public Task InvokeSystemMessageAsync(SystemMessage msg) => Handle(msg);

        public Task InvokeUserMessageAsync(object msg) => Handle(msg);

        public bool EscalationThrows { get; set; }

        public void EscalateFailure(Exception reason, object? message)
        {
            Escalated.Add((reason, message));
            if (EscalationThrows)
            {
                throw new NotSupportedException("the supervisor failed");
            }
        }

        private Task Handle(object message)
        {
            Handled.Add(message);
            if (Equals(message, Throws))
            {
                throw new InvalidOperationException($"handler failed on {message}");
            }
            return Results.TryGetValue(message, out Task? result) ? result : Task.CompletedTask;
        }
    }

    private sealed class RecordingStatistics : IMailboxStatistics
    {
        public ConcurrentQueue<string> Events { get; } = new();

        public void MailboxStarted() => Events.Enqueue("started");

        public void MessagePosted(object message) => Events.Enqueue($"posted {message}");

        public void MessageReceived(object message) => Events.Enqueue($"received {message}");

        public void MailboxEmpty() => Events.Enqueue("empty");
    }

    private static (WorkerPoolMailbox Mailbox, ManualDispatcher Dispatcher, RecordingInvoker Invoker) Registered(
        int throughput = 300, params IMailboxStatistics[] statistics)
    {
        var mailbox = new WorkerPoolMailbox(new LockingUnboundedMailboxQueue(4), new UnboundedMailboxQueue(), statistics);
        var dispatcher = new ManualDispatcher(throughput);
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        return (mailbox, dispatcher, invoker);
    }

    [Fact]
    public void Constructor_BadArguments_Throw()
    {
        var queue = new UnboundedMailboxQueue();
        Assert.Throws<ArgumentNullException>("systemMessages", () => new WorkerPoolMailbox(null!, queue));
        Assert.Throws<ArgumentNullException>("userMessages", () => new WorkerPoolMailbox(queue, null!));
        Assert.Throws<ArgumentNullException>("statistics", () => new WorkerPoolMailbox(queue, new UnboundedMailboxQueue(), null!));
        Assert.Throws<ArgumentNullException>("statistics", () => new WorkerPoolMailbox(queue, new UnboundedMailboxQueue(), [null!]));
        Assert.Throws<ArgumentException>("userMessages", () => new WorkerPoolMailbox(queue, queue));
        Assert.Throws<ArgumentOutOfRangeException>("size", () => WorkerPoolMailbox.CreateBounded(0));
        Assert.Throws<ArgumentOutOfRangeException>("fullMode", () => WorkerPoolMailbox.CreateBounded(10, (BoundedChannelFullMode)42));
    }

    [Fact]
    public void Post_BadMessages_AreRejectedBeforeAnythingIsQueued()
    {
        var (mailbox, dispatcher, _) = Registered();
        Assert.Throws<ArgumentNullException>("msg", () => mailbox.PostUserMessage(null!));
        Assert.Throws<ArgumentNullException>("msg", () => mailbox.PostSystemMessage(null!));
        ArgumentException notSystem = Assert.Throws<ArgumentException>("msg", () => mailbox.PostSystemMessage("not a system message"));
        Assert.Contains(nameof(SystemMessage), notSystem.Message, StringComparison.Ordinal);
        Assert.Equal(0, mailbox.UserMessageCount);
        Assert.Empty(dispatcher.Runs);
    }

    [Fact]
    public void RegisterHandlers_Twice_Throws()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        Assert.Throws<ArgumentNullException>("invoker", () => new WorkerPoolMailbox(new UnboundedMailboxQueue(), new UnboundedMailboxQueue()).RegisterHandlers(null!, dispatcher));
        Assert.Throws<ArgumentNullException>("dispatcher", () => new WorkerPoolMailbox(new UnboundedMailboxQueue(), new UnboundedMailboxQueue()).RegisterHandlers(invoker, null!));
        Assert.Throws<InvalidOperationException>(() => mailbox.RegisterHandlers(new RecordingInvoker(), dispatcher));
    }

    [Fact]
    public async Task Posts_WhileARunIsScheduled_ScheduleNoOtherRun_AndEveryRunIsTheSameDelegate()
    {
        var (mailbox, dispatcher, invoker) = Registered(throughput: 2);
        for (int i = 0; i < 5; i++)
        {
            mailbox.PostUserMessage(i);
        }
        Assert.Single(dispatcher.Runs);
        Assert.Equal(5, mailbox.UserMessageCount);

        int next = 0;
        // Each run handles the throughput's messages and schedules the next while messages remain.
        await dispatcher.RunNext(ref next);
        Assert.Equal([0, 1], invoker.Handled);
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        await dispatcher.RunNext(ref next);
        Assert.Equal([0, 1, 2, 3, 4], invoker.Handled);
        Assert.Equal(3, dispatcher.Runs.Count); // the last run found nothing left
        Assert.All(dispatcher.Runs, run => Assert.Same(dispatcher.Runs[0], run));

        mailbox.PostUserMessage(5);
        Assert.Equal(4, dispatcher.Runs.Count);
        Assert.Same(dispatcher.Runs[0], dispatcher.Runs[3]);
    }

    [Fact]
    public async Task SystemMessages_RunBeforeWaitingUserMessages()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        mailbox.PostUserMessage("user 1");
        mailbox.PostUserMessage("user 2");
        mailbox.PostSystemMessage(Started.Instance);
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { Started.Instance, "user 1", "user 2" }, invoker.Handled);
    }

    [Fact]
    public async Task Suspended_HoldsUserMessagesUntilResumed()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        mailbox.PostSystemMessage(SuspendMailbox.Instance);
        mailbox.PostUserMessage("held");
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { SuspendMailbox.Instance }, invoker.Handled);
        Assert.Single(dispatcher.Runs); // a suspended mailbox does not reschedule itself for user messages

        mailbox.PostUserMessage("also held");
        await dispatcher.RunNext(ref next);
        Assert.Single(invoker.Handled);
        Assert.Equal(2, mailbox.UserMessageCount);

        mailbox.PostSystemMessage(ResumeMailbox.Instance);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { SuspendMailbox.Instance, ResumeMailbox.Instance, "held", "also held" }, invoker.Handled);
    }

    [Fact]
    public async Task AHandlerThatThrows_IsEscalatedWithItsMessage_AndTheRestStillRun()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        invoker.Throws = "bad";
        mailbox.PostUserMessage("before");
        mailbox.PostUserMessage("bad");
        mailbox.PostUserMessage("after");
        int next = 0;
        await dispatcher.RunNext(ref next);
        (Exception reason, object? message) = Assert.Single(invoker.Escalated);
        Assert.IsType<InvalidOperationException>(reason);
        Assert.Equal("bad", message);

        // The failed run ended and, with a message left, scheduled the next.
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "before", "bad", "after" }, invoker.Handled);
    }

    [Fact]
    public async Task AnAsynchronousHandler_HoldsTheMailboxUntilItsTaskEnds()
    {
        var recorder = new RecordingStatistics();
        var (mailbox, dispatcher, invoker) = Registered(300, recorder);
        var slow = new TaskCompletionSource();
        invoker.Results["slow"] = slow.Task;
        mailbox.PostUserMessage("slow");
        mailbox.PostUserMessage("next");
        int next = 0;
        Task run = dispatcher.RunNext(ref next);
        Assert.False(run.IsCompleted);
        Assert.Equal(new object[] { "slow" }, invoker.Handled);

        mailbox.PostUserMessage("later");
        Assert.Single(dispatcher.Runs); // the run in progress holds the mailbox
        Assert.DoesNotContain("received slow", recorder.Events);

        slow.SetResult();
        await run;
        Assert.Contains("received slow", recorder.Events);
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "slow", "next", "later" }, invoker.Handled);
    }

    [Fact]
    public async Task AnAsynchronousHandlerThatFaults_IsEscalated_AndReleasesTheMailbox()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        var failing = new TaskCompletionSource();
        invoker.Results["failing"] = failing.Task;
        mailbox.PostUserMessage("failing");
        int next = 0;
        Task run = dispatcher.RunNext(ref next);
        failing.SetException(new TimeoutException("late"));
        await run;
        (Exception reason, object? message) = Assert.Single(invoker.Escalated);
        Assert.IsType<TimeoutException>(reason);
        Assert.Equal("failing", message);

        mailbox.PostUserMessage("after");
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "failing", "after" }, invoker.Handled);
    }

    [Fact]
    public void PostingStop_CancelsTheActorsTokenAtOnce()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        mailbox.PostUserMessage("busy");
        Assert.False(invoker.CancellationTokenSource!.IsCancellationRequested);
        mailbox.PostSystemMessage(Stop.Instance);
        Assert.True(invoker.CancellationTokenSource.IsCancellationRequested);
        Assert.Single(dispatcher.Runs);
    }

    [Fact]
    public async Task ABatch_IsQueuedAsItsMessages_AndAnAutoRespondingBatchFollowsThem()
    {
        var recorder = new RecordingStatistics();
        var (mailbox, dispatcher, invoker) = Registered(300, recorder);
        mailbox.PostUserMessage(new Batch(["a", "b"]));
        var responding = new RespondingBatch(["c"]);
        mailbox.PostUserMessage(new MessageEnvelope(responding, null, null));
        int next = 0;
        await dispatcher.RunNext(ref next);

        Assert.Equal(4, invoker.Handled.Count);
        Assert.Equal(new object[] { "a", "b", "c" }, invoker.Handled.GetRange(0, 3));
        MessageEnvelope envelope = Assert.IsType<MessageEnvelope>(invoker.Handled[3]);
        Assert.Same(responding, envelope.Message);
        Assert.Contains("posted a", recorder.Events);
        Assert.Contains("posted b", recorder.Events);
    }

    [Fact]
    public async Task StatisticsHooks_AreToldOfEveryEvent()
    {
        var recorder = new RecordingStatistics();
        var (mailbox, dispatcher, _) = Registered(300, recorder);
        mailbox.Start();
        mailbox.PostUserMessage("m");
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(["started", "posted m", "received m", "empty"], recorder.Events);
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task MessagesPostedBeforeRegistration_RunAfterStarted(bool bounded)
    {
        IMailbox mailbox = bounded ? WorkerPoolMailbox.CreateBounded(8) : WorkerPoolMailbox.Create();
        mailbox.PostUserMessage("early");
        var dispatcher = new ManualDispatcher(300);
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        Assert.Empty(dispatcher.Runs);

        // What Proto.Actor does when it spawns: Started, then Start.
        mailbox.PostSystemMessage(Started.Instance);
        mailbox.Start();
        Assert.Single(dispatcher.Runs);
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { Started.Instance, "early" }, invoker.Handled);
    }

    [Fact]
    public async Task Start_SchedulesWhatWasPostedBeforeRegistration()
    {
        IMailbox mailbox = WorkerPoolMailbox.Create();
        mailbox.PostUserMessage("early");
        var dispatcher = new ManualDispatcher(300);
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        mailbox.Start();
        Assert.Single(dispatcher.Runs);
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "early" }, invoker.Handled);
    }

    /// <summary>A queue that posts one more message through the mailbox the first time a pop finds it empty.</summary>
    private sealed class PostOnFirstEmptyPop(IMailboxQueue inner) : IMailboxQueue
    {
        public WorkerPoolMailbox? Mailbox { get; set; }

        private bool _posted;

        public bool HasMessages => inner.HasMessages;

        public int Length => inner.Length;

        public void Push(object message) => inner.Push(message);

        public object? Pop()
        {
            object? message = inner.Pop();
            if (message is null && !_posted)
            {
                _posted = true;
                // The run still holds the mailbox: this post cannot schedule, so the run's last look must see it.
                Mailbox!.PostUserMessage("late");
            }
            return message;
        }
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task AMessagePostedAsTheRunEnds_GetsARun(bool bounded)
    {
        var queue = new PostOnFirstEmptyPop(bounded
            ? new BoundedMessageQueue(8, BoundedChannelFullMode.Wait)
            : new UnboundedMailboxQueue());
        var mailbox = new WorkerPoolMailbox(new LockingUnboundedMailboxQueue(4), queue);
        queue.Mailbox = mailbox;
        var dispatcher = new ManualDispatcher(300);
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        mailbox.PostUserMessage("first");
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "first" }, invoker.Handled);
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "first", "late" }, invoker.Handled);
    }

    /// <summary>Throws from its next Schedule when told to.</summary>
    private sealed class FailingDispatcher : IDispatcher
    {
        public bool FailNext { get; set; }

        public List<Func<Task>> Runs { get; } = [];

        public int Throughput => 300;

        public void Schedule(Func<Task> runner)
        {
            if (FailNext)
            {
                FailNext = false;
                throw new InvalidOperationException("the dispatcher refused the run");
            }
            Runs.Add(runner);
        }
    }

    [Fact]
    public async Task ADispatcherThatThrows_ReachesThePoster_AndTheNextPostSchedulesAgain()
    {
        var mailbox = (WorkerPoolMailbox)WorkerPoolMailbox.Create();
        var dispatcher = new FailingDispatcher { FailNext = true };
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        Assert.Throws<InvalidOperationException>(() => mailbox.PostUserMessage("refused"));
        Assert.Empty(dispatcher.Runs);

        mailbox.PostUserMessage("next");
        Func<Task> run = Assert.Single(dispatcher.Runs);
        await run();
        Assert.Equal(new object[] { "refused", "next" }, invoker.Handled);
    }

    private sealed class ThrowingStatistics : IMailboxStatistics
    {
        public void MailboxStarted()
        {
        }

        public void MessagePosted(object message) => throw new InvalidOperationException("hook failed");

        public void MessageReceived(object message)
        {
        }

        public void MailboxEmpty()
        {
        }
    }

    [Fact]
    public async Task AStatisticsHookThatThrowsOnPost_ReachesThePoster_AndTheMessageStillRuns()
    {
        var (mailbox, dispatcher, invoker) = Registered(300, new ThrowingStatistics());
        Assert.Throws<InvalidOperationException>(() => mailbox.PostUserMessage("user"));
        int next = 0;
        Assert.Single(dispatcher.Runs);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "user" }, invoker.Handled);

        Assert.Throws<InvalidOperationException>(() => mailbox.PostSystemMessage(Stop.Instance));
        Assert.True(invoker.CancellationTokenSource!.IsCancellationRequested);
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "user", Stop.Instance }, invoker.Handled);
    }

    [Fact]
    public async Task AnEscalationThatThrows_ReleasesTheMailbox()
    {
        var (mailbox, dispatcher, invoker) = Registered();
        invoker.Throws = "bad";
        invoker.EscalationThrows = true;
        mailbox.PostUserMessage("bad");
        int next = 0;
        await Assert.ThrowsAsync<NotSupportedException>(() => dispatcher.RunNext(ref next));

        mailbox.PostUserMessage("after");
        Assert.Equal(2, dispatcher.Runs.Count);
        await dispatcher.RunNext(ref next);
        Assert.Equal(new object[] { "bad", "after" }, invoker.Handled);
    }

    [Fact]
    public async Task ABoundedMailbox_HoldsItsMessagesInOrder()
    {
        var mailbox = WorkerPoolMailbox.CreateBounded(4);
        var dispatcher = new ManualDispatcher(300);
        var invoker = new RecordingInvoker();
        mailbox.RegisterHandlers(invoker, dispatcher);
        for (int i = 0; i < 4; i++)
        {
            mailbox.PostUserMessage(i);
        }
        Assert.Equal(4, mailbox.UserMessageCount);
        int next = 0;
        await dispatcher.RunNext(ref next);
        Assert.Equal([0, 1, 2, 3], invoker.Handled);
    }
}
