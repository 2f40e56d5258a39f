using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Gives access to the named <see cref="WorkerPool"/>s registered with
/// <c>AddWorkerPool</c>. Each pool is also a keyed singleton: <c>[FromKeyedServices("name")] WorkerPool</c> or
/// <c>GetRequiredKeyedService&lt;WorkerPool&gt;("name")</c> resolve the same instance as <see cref="GetPool(string)"/>.
/// </summary>
/// <remarks>
/// A pool is created the first time it is resolved, and at the latest when the host starts. Names are compared
/// ordinally (case-sensitive), as service keys are.
/// </remarks>
public interface IWorkerPoolProvider
{
    /// <summary>The names of the registered pools, in registration order.</summary>
    IReadOnlyList<string> Names { get; }

    /// <summary>
    /// Every registered pool by registration name, in registration order. Reading it creates the pools not created yet.
    /// </summary>
    /// <exception cref="System.InvalidOperationException">A pool's options are invalid (the message names the pool).</exception>
    IReadOnlyDictionary<string, WorkerPool> Pools { get; }

    /// <summary>Returns the pool registered under <paramref name="name"/>, creating it on first use.</summary>
    /// <param name="name">The name the pool was registered with.</param>
    /// <exception cref="System.ArgumentNullException"><paramref name="name"/> is null.</exception>
    /// <exception cref="KeyNotFoundException">No pool is registered under <paramref name="name"/>.</exception>
    /// <exception cref="System.InvalidOperationException">The pool's options are invalid (the message names the pool).</exception>
    WorkerPool GetPool(string name);

    /// <summary>Looks up the pool registered under <paramref name="name"/>, creating it on first use.</summary>
    /// <param name="name">The name the pool was registered with.</param>
    /// <param name="pool">The pool, or <see langword="null"/> when no pool is registered under that name.</param>
    /// <returns>Whether a pool is registered under <paramref name="name"/>.</returns>
    /// <exception cref="System.ArgumentNullException"><paramref name="name"/> is null.</exception>
    /// <exception cref="System.InvalidOperationException">The pool's options are invalid (the message names the pool).</exception>
    bool TryGetPool(string name, [NotNullWhen(true)] out WorkerPool? pool);
}
