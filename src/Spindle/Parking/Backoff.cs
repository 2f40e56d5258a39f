using System.Threading;

namespace Spindle.Parking;

/// <summary>
/// Randomised exponential backoff for searching workers: attempt <c>k</c> spins a random count in
/// <c>[2^(k-1), 2^k)</c>, so attempt 0 spins not at all and each later attempt roughly doubles.
/// </summary>
/// <remarks>
/// The runtime once computed <c>random &gt;&gt; (32 - attempt)</c>; C# masks a 32-bit shift count to five bits, so attempt 0
/// shifted by 0 and spun a huge random count. Here the range is computed with a 64-bit multiply instead of a shift by a
/// variable amount, and attempt 0 is an explicit empty range.
/// </remarks>
internal sealed class Backoff
{
    /// <summary>Largest exponent; attempt counts above it spin in the same range as this one.</summary>
    public const int MaxExponent = 10;

    private uint _random;

    public Backoff(uint seed) => _random = seed | 1;

    /// <summary>The number of <see cref="Thread.SpinWait(int)"/> iterations for this attempt.</summary>
    public int SpinCount(int attempt)
    {
        if (attempt <= 0)
        {
            return 0;
        }
        int exponent = attempt > MaxExponent ? MaxExponent : attempt;
        int low = 1 << (exponent - 1);
        // xorshift32: cheap, and good enough to de-synchronise workers that start searching together.
        uint x = _random;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        _random = x;
        return low + (int)(((ulong)x * (uint)low) >> 32);
    }

    /// <summary>Spins for <see cref="SpinCount(int)"/> iterations.</summary>
    public void Spin(int attempt)
    {
        int count = SpinCount(attempt);
        if (count > 0)
        {
            Thread.SpinWait(count);
        }
    }
}
