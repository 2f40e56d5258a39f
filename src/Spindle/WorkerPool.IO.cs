using Spindle.IO;

using Spindle.Polling;
using Spindle.Primitives;

namespace Spindle;

public sealed partial class WorkerPool
{
    /// <summary>
    /// A <see cref="System.IO.Pipelines.PipeScheduler"/> that runs pipe callbacks on this pool (see
    /// <see cref="WorkerPoolPipeScheduler"/>): the reader and writer scheduler for pipes whose code should resume here.
    /// </summary>
    public WorkerPoolPipeScheduler PipeScheduler =>
        (WorkerPoolPipeScheduler)(_io.PipeScheduler ?? _io.PublishPipeScheduler(new WorkerPoolPipeScheduler(this)));

    /// <summary>The pool's sockets: its I/O driver and the sockets on the runtime's engine (see <see cref="PoolIo"/>).</summary>
    internal PoolIo Io => _io;

    /// <summary>Tests: sockets of this pool use the runtime's engine even where the driver exists (set before the first socket).</summary>
    internal bool SocketsUseRuntimeEngine
    {
        get => _io.UseRuntimeEngine;
        set => _io.UseRuntimeEngine = value;
    }
}
