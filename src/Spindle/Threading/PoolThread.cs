using System;
using System.Runtime.CompilerServices;
using System.Threading;
using Spindle.Primitives;

namespace Spindle.Threading;

/// <summary>Creates the threads that run a pool's items (workers and dedicated threads), as the pool's options say.</summary>
internal static class PoolThread
{
    /// <summary>
    /// A new, unstarted thread: from <see cref="WorkerPoolOptions.ThreadFactory"/> when set, with the pool's stack size,
    /// background flag and <paramref name="name"/>. Throws whatever the factory or the runtime throws.
    /// </summary>
    [MethodImpl(RarePath.Compile)]
    public static Thread Create(WorkerPoolOptions options, ThreadStart start, string name)
    {
        Func<ThreadStart, int, Thread>? factory = options.ThreadFactory;
        Thread thread = factory is not null ? factory(start, options.StackSize) : new Thread(start, options.StackSize);
        thread.IsBackground = options.UseBackgroundThreads;
        thread.Name = name;
        return thread;
    }
}
