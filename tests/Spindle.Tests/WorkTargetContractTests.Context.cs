using System;
using System.Threading;
using System.Threading.Tasks;
using Xunit;

namespace Spindle.Tests;

// ExecutionContext: the safe forms flow the caller's AsyncLocal values into the item, the Unsafe forms (and the
// IWorkItem forms, which are unsafe by definition) never do, and nothing leaks from one item into the next.
public abstract partial class WorkTargetContractTests
{
    private static readonly AsyncLocal<string?> s_flowed = new();

    /// <summary>The safe forms, each of which must carry the caller's value into its item.</summary>
    private static readonly (string Name, Action<WorkTarget, Action> Queue)[] s_safeForms =
    [
        ("QueueUserWorkItem(WaitCallback)", static (t, a) => t.QueueUserWorkItem(_ => a())),
        ("QueueUserWorkItem(WaitCallback, state)", static (t, a) => t.QueueUserWorkItem(s => ((Action)s!)(), a)),
        ("QueueUserWorkItem<T>(preferLocal: false)", static (t, a) => t.QueueUserWorkItem(s => s(), a, preferLocal: false)),
        ("QueueUserWorkItem<T>(preferLocal: true)", static (t, a) => t.QueueUserWorkItem(s => s(), a, preferLocal: true)),
        ("QueueUserWorkItem<T>(value state)", static (t, a) => t.QueueUserWorkItem(s => s.Action(), (Action: a, Unused: 0), preferLocal: false)),
        ("QueueUserWorkItem<T>(WorkItemOptions.None)", static (t, a) => t.QueueUserWorkItem(s => s(), a, WorkItemOptions.None)),
        ("QueueUserWorkItem<T>(WorkItemOptions.LongRunning)", static (t, a) => t.QueueUserWorkItem(s => s(), a, WorkItemOptions.LongRunning)),
        ("TryQueueUserWorkItem<T>", static (t, a) => Assert.True(t.TryQueueUserWorkItem(s => s(), a, preferLocal: false))),
        ("QueueUserWorkItemAsync<T>", static (t, a) => Assert.True(t.QueueUserWorkItemAsync(s => s(), a).IsCompletedSuccessfully)),
        ("Run(Action)", static (t, a) => _ = t.Run(a)),
        ("Run(Action, token)", static (t, a) => _ = t.Run(a, new CancellationTokenSource().Token)),
        ("Run(Func<T>)", static (t, a) => _ = t.Run(() => { a(); return 0; })),
        ("Run(Func<Task>)", static (t, a) => _ = t.Run(() => { a(); return Task.CompletedTask; })),
        ("RunAsValueTask(Action)", static (t, a) => _ = t.RunAsValueTask(a).AsTask()),
        ("RunAsValueTask(Func<T>)", static (t, a) => _ = t.RunAsValueTask(() => { a(); return 0; }).AsTask()),
    ];

    /// <summary>The Unsafe and IWorkItem forms, none of which may carry the caller's value.</summary>
    private static readonly (string Name, Action<WorkTarget, Action> Queue)[] s_unsafeForms =
    [
        ("UnsafeQueueUserWorkItem(WaitCallback, state)", static (t, a) => t.UnsafeQueueUserWorkItem(s => ((Action)s!)(), a)),
        ("UnsafeQueueUserWorkItem<T>(preferLocal: false)", static (t, a) => t.UnsafeQueueUserWorkItem(s => s(), a, preferLocal: false)),
        ("UnsafeQueueUserWorkItem<T>(value state)", static (t, a) => t.UnsafeQueueUserWorkItem(s => s.Action(), (Action: a, Unused: 0), preferLocal: true)),
        ("UnsafeQueueUserWorkItem<T>(WorkItemOptions.PreferLocal)", static (t, a) => t.UnsafeQueueUserWorkItem(s => s(), a, WorkItemOptions.PreferLocal)),
        ("UnsafeQueueUserWorkItem<T>(WorkItemOptions.LongRunning)", static (t, a) => t.UnsafeQueueUserWorkItem(s => s(), a, WorkItemOptions.LongRunning)),
        ("UnsafeQueueUserWorkItem(IWorkItem)", static (t, a) => t.UnsafeQueueUserWorkItem(new ActionItem(a), preferLocal: false)),
        ("UnsafeQueueUserWorkItem(IWorkItem, WorkItemOptions)", static (t, a) => t.UnsafeQueueUserWorkItem(new ActionItem(a), WorkItemOptions.None)),
        ("TryQueueUserWorkItem(IWorkItem)", static (t, a) => Assert.True(t.TryQueueUserWorkItem(new ActionItem(a), preferLocal: true))),
        ("QueueUserWorkItemAsync(IWorkItem)", static (t, a) => Assert.True(t.QueueUserWorkItemAsync(new ActionItem(a)).IsCompletedSuccessfully)),
        ("UnsafeQueueContinuation", static (t, a) => t.UnsafeQueueContinuation(s => s(), a, preferLocal: false)),
    ];

    private sealed class ActionItem(Action action) : IWorkItem
    {
        public void Execute() => action();
    }

    /// <summary>
    /// From a fresh thread carrying an AsyncLocal value, queues one observer through each form; returns what each
    /// observer saw, and fails on any that ran off the target.
    /// </summary>
    private string?[] ObserveFlow((string Name, Action<WorkTarget, Action> Queue)[] forms)
    {
        var seen = new string?[forms.Length];
        var onTarget = new bool[forms.Length];
        Array.Fill(seen, "not run");
        using var done = new CountdownEvent(forms.Length);
        Waits.RunBounded(() =>
        {
            s_flowed.Value = "caller";
            for (int i = 0; i < forms.Length; i++)
            {
                int slot = i;
                forms[i].Queue(Target, () =>
                {
                    seen[slot] = s_flowed.Value;
                    onTarget[slot] = IsOnTarget();
                    done.Signal();
                });
            }
        }, "queueing from a thread with an AsyncLocal value");
        Waits.For(done, "the observers");
        for (int i = 0; i < forms.Length; i++)
        {
            Assert.True(onTarget[i], $"{forms[i].Name} ran off the target.");
        }
        return seen;
    }

    [Fact]
    public void TheSafeForms_FlowTheCallersExecutionContext()
    {
        Assert.True(Pool.FlowsExecutionContext);
        string?[] seen = ObserveFlow(s_safeForms);
        for (int i = 0; i < seen.Length; i++)
        {
            Assert.True(seen[i] == "caller", $"{s_safeForms[i].Name} saw '{seen[i]}', not the caller's value.");
        }
    }

    [Fact]
    public void TheUnsafeForms_NeverFlowTheCallersExecutionContext()
    {
        string?[] seen = ObserveFlow(s_unsafeForms);
        for (int i = 0; i < seen.Length; i++)
        {
            Assert.True(seen[i] is null, $"{s_unsafeForms[i].Name} saw '{seen[i]}', the caller's value.");
        }
    }

    [Fact]
    public void AValueSetInsideAnItem_FlowsToTheItemsItQueuesSafely_AndLeaksIntoNoOtherItem()
    {
        string? safe = "not run", unsafeChild = "not run", later = "not run";
        using var children = new CountdownEvent(2);
        Target.UnsafeQueueUserWorkItem(_ =>
        {
            s_flowed.Value = "inner";
            Target.QueueUserWorkItem(__ =>
            {
                safe = s_flowed.Value;
                children.Signal();
            });
            Target.UnsafeQueueUserWorkItem(__ =>
            {
                unsafeChild = s_flowed.Value;
                children.Signal();
            }, null);
        }, null);
        Waits.For(children, "items queued from an item");
        Assert.Equal("inner", safe);
        Assert.Null(unsafeChild);

        // Every worker runs one more unsafe item from a clean thread: none sees the value set inside the first.
        using var observers = new CountdownEvent(4 * Threads);
        for (int i = 0; i < observers.InitialCount; i++)
        {
            Target.UnsafeQueueUserWorkItem(_ =>
            {
                if (s_flowed.Value is not null)
                {
                    later = s_flowed.Value;
                }
                observers.Signal();
            }, null);
        }
        Waits.For(observers, "later items");
        Assert.Equal("not run", later);
    }
}
