using System.Diagnostics;
using System.Threading;

namespace Spindle.Parking;

/// <summary>
/// How a searching worker waits between looks (owner only): randomised exponential backoff, where attempt <c>k</c>
/// spins a random count in <c>[2^(k-1), 2^k)</c>, so attempt 0 spins not at all and each later attempt roughly
/// doubles; and its timed yields while other processes keep the cores busy (see <see cref="YieldVerdict"/>).
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

    /// <summary>
    /// Spin iterations that stand in for one yield while yields are stopped (see <see cref="YieldOnSharedCores"/>): about
    /// as long as a yield takes with nothing else runnable, under a microsecond.
    /// </summary>
    public const int SharedCoreYieldSpins = 20;

    private uint _random;

    // This worker's window of timed yields (see YieldVerdict); owner only.
    private YieldVerdict.Window _yields;

    public Backoff(uint seed) => _random = seed | 1;

    /// <summary>
    /// A searcher's yield while other processes keep the cores busy: yields the core and times the yield for
    /// <paramref name="verdict"/>, or, while the verdict has stopped yields (they were handing the core to another
    /// process for a slice), spins briefly in its place.
    /// </summary>
    public void YieldOnSharedCores(YieldVerdict verdict)
    {
        long before = Stopwatch.GetTimestamp();
        if (verdict.YieldsStopped(before))
        {
            Thread.SpinWait(SharedCoreYieldSpins);
            return;
        }
        Thread.Yield();
        verdict.Record(ref _yields, Stopwatch.GetTimestamp() - before, before);
    }

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
