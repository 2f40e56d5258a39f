using Spindle;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>
/// What <c>AddWorkerPool</c> returns: the pool's name, to hang more of the pool's registrations on (lanes, a health
/// check, background services); and the service collection itself, so that code written when <c>AddWorkerPool</c>
/// returned the <see cref="IServiceCollection"/> still compiles and chains as it did.
/// </summary>
/// <remarks>Every member of <see cref="IServiceCollection"/> acts on <see cref="Services"/>.</remarks>
public interface IWorkerPoolBuilder : IServiceCollection
{
    /// <summary>The pool's name: its service key, its options name and its <see cref="WorkerPoolOptions.Name"/>.</summary>
    string Name { get; }

    /// <summary>The service collection the pool is registered with.</summary>
    IServiceCollection Services { get; }
}
