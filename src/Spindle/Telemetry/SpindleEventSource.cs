using System;
using System.Diagnostics.CodeAnalysis;
using System.Diagnostics.Tracing;
using System.Runtime.CompilerServices;

namespace Spindle.Telemetry;

/// <summary>
/// The <c>Spindle</c> event source: what an operator needs to see in a trace (<c>dotnet-trace collect --providers
/// Spindle:0x7</c>, an <see cref="EventListener"/>, ETW or LTTng), one event per decision the pool makes about threads
/// and its lifetime, and per work item that goes wrong. Every event names its pool.
/// </summary>
/// <remarks>
/// <para>Warning and Error events (a thread the OS refused, starvation, a stuck item, an item that threw, a callback
/// after the stop) carry no keyword, so every session at Warning or more receives them, whatever keywords it asks for:
/// an EventPipe session whose keywords for the provider are 0 (what dotnet-trace asks for with a bare
/// <c>--providers Spindle</c>) enables only the events without a keyword. The Informational events (threads added and
/// retired, shutdown) have keywords: ask for them (0x7 is all three; <c>Spindle:0x7</c>).</para>
/// <para>Events cost nothing while nobody listens: every call site tests <see cref="IsOn"/> first (one field read), and
/// none of them is on the per-item path.</para> Payloads are written with
/// <see cref="EventSource.WriteEventCore"/> (no boxing, no reflection at the call, safe for trimming and NativeAOT).
/// <para>The event and payload names are a contract: tools and dashboards key on them.</para>
/// </remarks>
[EventSource(Name = "Spindle")]
internal sealed class SpindleEventSource : EventSource
{
    /// <summary>The one instance: every pool of the process writes to it.</summary>
    public static readonly SpindleEventSource Log = new();

    private SpindleEventSource()
    {
    }

    /// <summary>Event keywords: which families of events a session enables.</summary>
    public static class Keywords
    {
        /// <summary>Threads added and retired (a thread not created and starvation are Warning events, with no keyword).</summary>
        public const EventKeywords Threads = (EventKeywords)0x1;

        /// <summary>
        /// Work items. Its events (stuck items, exceptions) are Warning and Error events, which have no keyword; the
        /// value stays reserved, and a session that asks for it receives them as any other does.
        /// </summary>
        public const EventKeywords WorkItems = (EventKeywords)0x2;

        /// <summary>Shutdown of pools and lanes (a callback after the stop is a Warning event, with no keyword).</summary>
        public const EventKeywords Lifetime = (EventKeywords)0x4;
    }

    // WriteEventCore is marked as needing unreferenced code because it can serialize object graphs; these payloads are
    // strings and primitives, which the trimmer keeps.
    private const string PrimitivePayloads = "Every payload is a string or a primitive.";

    internal const int ThreadInjectedId = 1;
    internal const int ThreadRetiredId = 2;
    internal const int ThreadCreationFailedId = 3;
    internal const int StarvationDetectedId = 4;
    internal const int StuckWorkItemId = 5;
    internal const int WorkItemExceptionId = 6;
    internal const int ShutdownStartedId = 7;
    internal const int ShutdownFinishedId = 8;
    internal const int CallbackRedirectedId = 9;

    /// <summary>
    /// Whether an event at <paramref name="level"/> of the family <paramref name="keywords"/> reaches a listener. Events at
    /// Warning or above have no keyword (see the remarks on the class), so for them the family does not matter: any
    /// session enabled at their level receives them.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool IsOn(EventLevel level, EventKeywords keywords) =>
        IsEnabled(level, level <= EventLevel.Warning ? EventKeywords.None : keywords);

    /// <summary>A worker thread was added to <paramref name="PoolName"/> for <paramref name="Reason"/>; the pool now has <paramref name="ThreadCount"/>.</summary>
    [Event(ThreadInjectedId, Level = EventLevel.Informational, Keywords = Keywords.Threads,
        Message = "Pool {0}: thread added ({1}); {2} threads")]
    public void ThreadInjected(string PoolName, string Reason, int ThreadCount) => WriteStringStringInt(ThreadInjectedId, PoolName, Reason, ThreadCount);

    /// <summary>A worker thread of <paramref name="PoolName"/> retired for <paramref name="Reason"/>.</summary>
    [Event(ThreadRetiredId, Level = EventLevel.Informational, Keywords = Keywords.Threads,
        Message = "Pool {0}: thread retired ({1}); {2} threads")]
    public void ThreadRetired(string PoolName, string Reason, int ThreadCount) => WriteStringStringInt(ThreadRetiredId, PoolName, Reason, ThreadCount);

    /// <summary>The operating system refused a thread the pool wanted (for <paramref name="Reason"/>); it retries later.</summary>
    [Event(ThreadCreationFailedId, Level = EventLevel.Warning,
        Message = "Pool {0}: a thread for {1} could not be created; {2} threads")]
    public void ThreadCreationFailed(string PoolName, string Reason, int ThreadCount) => WriteStringStringInt(ThreadCreationFailedId, PoolName, Reason, ThreadCount);

    /// <summary>
    /// Work has waited with no worker free and no item completing for <paramref name="StalledMs"/>: the pool adds
    /// <paramref name="AddedThreads"/> threads to the <paramref name="ThreadCount"/> it has.
    /// </summary>
    [Event(StarvationDetectedId, Level = EventLevel.Warning,
        Message = "Pool {0}: starvation after {1} ms with {2} threads and {3} items pending; adding {4}")]
    [UnconditionalSuppressMessage("ReflectionAnalysis", "IL2026", Justification = PrimitivePayloads)]
    public unsafe void StarvationDetected(string PoolName, double StalledMs, int ThreadCount, long PendingCount, int AddedThreads)
    {
        fixed (char* pool = PoolName)
        {
            EventData* data = stackalloc EventData[5];
            SetString(ref data[0], pool, PoolName);
            data[1] = new EventData { DataPointer = (IntPtr)(&StalledMs), Size = sizeof(double) };
            data[2] = new EventData { DataPointer = (IntPtr)(&ThreadCount), Size = sizeof(int) };
            data[3] = new EventData { DataPointer = (IntPtr)(&PendingCount), Size = sizeof(long) };
            data[4] = new EventData { DataPointer = (IntPtr)(&AddedThreads), Size = sizeof(int) };
            WriteEventCore(StarvationDetectedId, 5, data);
        }
    }

    /// <summary>
    /// An item of <paramref name="PoolName"/> has been running on worker <paramref name="WorkerId"/> for
    /// <paramref name="RunningMs"/>, past the pool's stuck-item threshold (worker 0: the pool's relief thread, see
    /// <see cref="WorkerPoolOptions.OutsideWorkReliefDelay"/>). <paramref name="Item"/> names it: the delegate's declaring
    /// type and method, or the work item's type. Reported once per item.
    /// </summary>
    [Event(StuckWorkItemId, Level = EventLevel.Warning,
        Message = "Pool {0}: {1} has been running for {3} ms on worker #{2}")]
    [UnconditionalSuppressMessage("ReflectionAnalysis", "IL2026", Justification = PrimitivePayloads)]
    public unsafe void StuckWorkItem(string PoolName, string Item, int WorkerId, double RunningMs)
    {
        fixed (char* pool = PoolName)
        fixed (char* item = Item)
        {
            EventData* data = stackalloc EventData[4];
            SetString(ref data[0], pool, PoolName);
            SetString(ref data[1], item, Item);
            data[2] = new EventData { DataPointer = (IntPtr)(&WorkerId), Size = sizeof(int) };
            data[3] = new EventData { DataPointer = (IntPtr)(&RunningMs), Size = sizeof(double) };
            WriteEventCore(StuckWorkItemId, 4, data);
        }
    }

    /// <summary>
    /// An item of <paramref name="PoolName"/> threw <paramref name="ExceptionType"/>; <paramref name="Handled"/>: the
    /// pool carries on (the Report policy, or a handler marked it handled); otherwise the process fails next.
    /// </summary>
    [Event(WorkItemExceptionId, Level = EventLevel.Error,
        Message = "Pool {0}: a work item threw {1}: {2} (handled: {3})")]
    [UnconditionalSuppressMessage("ReflectionAnalysis", "IL2026", Justification = PrimitivePayloads)]
    public unsafe void WorkItemException(string PoolName, string ExceptionType, string ExceptionMessage, bool Handled)
    {
        int handled = Handled ? 1 : 0; // a manifest boolean is 4 bytes
        fixed (char* pool = PoolName)
        fixed (char* type = ExceptionType)
        fixed (char* message = ExceptionMessage)
        {
            EventData* data = stackalloc EventData[4];
            SetString(ref data[0], pool, PoolName);
            SetString(ref data[1], type, ExceptionType);
            SetString(ref data[2], message, ExceptionMessage);
            data[3] = new EventData { DataPointer = (IntPtr)(&handled), Size = sizeof(int) };
            WriteEventCore(WorkItemExceptionId, 4, data);
        }
    }

    /// <summary>Shutdown of <paramref name="PoolName"/> began in <paramref name="Mode"/> (Drain or CancelPending).</summary>
    [Event(ShutdownStartedId, Level = EventLevel.Informational, Keywords = Keywords.Lifetime,
        Message = "Pool {0}: shutdown started ({1})")]
    public void ShutdownStarted(string PoolName, string Mode) => WriteEvent(ShutdownStartedId, PoolName, Mode);

    /// <summary>
    /// <paramref name="PoolName"/> has stopped: every accepted item ran (<paramref name="CompletedCount"/> over its life)
    /// or was cancelled (<paramref name="CancelledCount"/>); <paramref name="RedirectedCount"/> callbacks arrived after
    /// the stop and ran on the built-in pool.
    /// </summary>
    [Event(ShutdownFinishedId, Level = EventLevel.Informational, Keywords = Keywords.Lifetime,
        Message = "Pool {0}: stopped; {1} items completed, {2} cancelled, {3} redirected")]
    [UnconditionalSuppressMessage("ReflectionAnalysis", "IL2026", Justification = PrimitivePayloads)]
    public unsafe void ShutdownFinished(string PoolName, long CompletedCount, long CancelledCount, long RedirectedCount)
    {
        fixed (char* pool = PoolName)
        {
            EventData* data = stackalloc EventData[4];
            SetString(ref data[0], pool, PoolName);
            data[1] = new EventData { DataPointer = (IntPtr)(&CompletedCount), Size = sizeof(long) };
            data[2] = new EventData { DataPointer = (IntPtr)(&CancelledCount), Size = sizeof(long) };
            data[3] = new EventData { DataPointer = (IntPtr)(&RedirectedCount), Size = sizeof(long) };
            WriteEventCore(ShutdownFinishedId, 4, data);
        }
    }

    /// <summary>
    /// <paramref name="Item"/> was queued to <paramref name="PoolName"/> after the pool had stopped (a post to its
    /// SynchronizationContext, a task on its TaskScheduler, a firing of one of its timers, a leftover of a lane) and is
    /// running on the built-in thread pool instead, outside the pool's threads, limits and metrics. Never lost, never
    /// refused (refusing it would strand an awaiter), but an operator should know: work that outlives its pool usually
    /// means a component was stopped in the wrong order.
    /// </summary>
    [Event(CallbackRedirectedId, Level = EventLevel.Warning,
        Message = "Pool {0}: {1} arrived after the pool had stopped and runs on the built-in thread pool")]
    public void CallbackRedirected(string PoolName, string Item) => WriteEvent(CallbackRedirectedId, PoolName, Item);

    [UnconditionalSuppressMessage("ReflectionAnalysis", "IL2026", Justification = PrimitivePayloads)]
    [NonEvent]
    private unsafe void WriteStringStringInt(int eventId, string first, string second, int third)
    {
        fixed (char* a = first)
        fixed (char* b = second)
        {
            EventData* data = stackalloc EventData[3];
            SetString(ref data[0], a, first);
            SetString(ref data[1], b, second);
            data[2] = new EventData { DataPointer = (IntPtr)(&third), Size = sizeof(int) };
            WriteEventCore(eventId, 3, data);
        }
    }

    [NonEvent]
    private static unsafe void SetString(ref EventData data, char* chars, string value)
    {
        data.DataPointer = (IntPtr)chars;
        data.Size = (value.Length + 1) * sizeof(char); // with the terminating null, as the manifest's string type wants
    }
}
