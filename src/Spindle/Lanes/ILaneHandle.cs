using System;
using System.Diagnostics.CodeAnalysis;

namespace Spindle.Lanes;

/// <summary>
/// A lane's public handle, as the lane sees it: the object a caller holds, which words the exceptions of a refused item
/// (it knows the pool's name and state). Implemented by the façade's lane type; set once, before the lane is published.
/// </summary>
internal interface ILaneHandle
{
    /// <summary>Throws the exception every entry point throws once the lane, or its pool, is shutting down.</summary>
    [DoesNotReturn]
    void ThrowShutDown();

    /// <summary>The exception for an item refused because the lane is full.</summary>
    Exception FullException();
}
