namespace Spindle.Tasks;

/// <summary>The result type of the Run methods that produce no value.</summary>
internal readonly struct VoidResult
{
}
