using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.ExceptionServices;

namespace Spindle.Queues;

/// <summary>A queued item that reports its cancellation by completing what its caller awaits (a Run task).</summary>
internal interface ICancelCompletion
{
    /// <summary>
    /// Completes the caller's task or value task as cancelled by shutdown. Called once, after the item has marked itself
    /// cancelled (so no worker runs it and nothing else completes it), possibly after the sweep that cancelled it.
    /// </summary>
    void CompleteCancelled();
}

/// <summary>
/// Where the completions of the items a cancelling sweep drops wait while the sweep holds what the caller's code may
/// wait for.
/// </summary>
/// <remarks>
/// <para>Why. <see cref="ShutdownMode.CancelPending"/> cancels the queued items on the thread that shuts down, while it
/// holds the pool's drain (or a lane's hold, a lane's locks), so that the entries it takes out and must run again cannot
/// be stranded by a stop in between. Completing a Run task runs its synchronous continuations inline: the caller's code,
/// an <c>await</c> that goes on to dispose the pool, say. That disposal waits for the stop which the held drain keeps
/// off, and the drain is released only when that code returns: a deadlock. So a sweep runs inside a
/// <see cref="Defer"/> scope, an item that cancels itself calls <see cref="CompleteOrDefer"/>, and the completions run
/// when the outermost scope of the thread ends, after the sweep has let go of everything it held.</para>
/// <para>Protocol. The list is the thread's own (thread-static), so no other thread sees it. Each item has already won its
/// own cancel (its state word) before it hands its completion in, so nothing can run it or complete it meanwhile: the
/// completion is late by the rest of the sweep, not lost, and it still happens before the shutdown call returns. Scopes
/// nest (a lane's sweep inside the pool's): only the outermost runs the list. The list is detached before it runs, so
/// a completion whose code shuts a pool down again sweeps with a list of its own. Every completion runs even if one
/// throws; afterwards the exception is rethrown, as an inline completion would have thrown it (several in an
/// <see cref="AggregateException"/>).</para>
/// </remarks>
internal static class CancelCompletions
{
    [ThreadStatic]
    private static List<ICancelCompletion>? t_pending;

    [ThreadStatic]
    private static int t_depth;

    /// <summary>Opens a scope on this thread: completions handed in until its end (the outermost's) wait for it.</summary>
    public static Scope Defer()
    {
        t_depth++;
        return default;
    }

    /// <summary>Completes the item now, or at the end of this thread's outermost scope if one is open.</summary>
    public static void CompleteOrDefer(ICancelCompletion item)
    {
        if (t_depth == 0)
        {
            item.CompleteCancelled();
            return;
        }
        (t_pending ??= []).Add(item);
    }

    private static void EndScope()
    {
        Debug.Assert(t_depth > 0, "A scope ends once, after it began.");
        if (--t_depth != 0)
        {
            return;
        }
        List<ICancelCompletion>? pending = t_pending;
        if (pending is null)
        {
            return;
        }
        t_pending = null;
        List<Exception>? errors = null;
        foreach (ICancelCompletion item in pending)
        {
            try
            {
                item.CompleteCancelled();
            }
            catch (Exception e)
            {
                (errors ??= []).Add(e);
            }
        }
        if (errors is [Exception only])
        {
            ExceptionDispatchInfo.Throw(only);
        }
        if (errors is not null)
        {
            throw new AggregateException("Code that ran when the tasks of cancelled items completed threw.", errors);
        }
    }

    /// <summary>A deferral scope: disposing it (once) ends it.</summary>
    public readonly struct Scope : IDisposable
    {
        /// <summary>Ends the scope; the outermost end runs the completions handed in meanwhile.</summary>
        public void Dispose() => EndScope();
    }
}
