namespace Spindle.Tests;

/// <summary>The pool as shipped: the platform's blocker (a futex on Linux), default rings and spinning.</summary>
public sealed class DefaultBlockerPoolTests : WorkerPoolContractTests
{
}
