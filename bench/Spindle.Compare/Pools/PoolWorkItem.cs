using System.Threading;

namespace Spindle.Compare.Pools;

/// <summary>
/// A reusable, allocation-free work item that every pool under test accepts: one <see cref="Execute"/> serves both
/// Spindle's <see cref="IWorkItem"/> and the built-in pool's <see cref="IThreadPoolWorkItem"/>.
/// </summary>
internal abstract class PoolWorkItem : IWorkItem, IThreadPoolWorkItem
{
    public abstract void Execute();
}
