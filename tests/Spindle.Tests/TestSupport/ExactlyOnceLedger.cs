using System;
using System.Collections.Generic;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>
/// Counts how often each numbered item ran. <see cref="AssertExactlyOnce"/> fails on any item that ran zero times or
/// more than once, naming the first few; the counts are exact, not "it did not crash".
/// </summary>
internal sealed class ExactlyOnceLedger : IDisposable
{
    private readonly int[] _hits;
    private readonly ManualResetEventSlim _allSeen = new();
    private int _total;

    public ExactlyOnceLedger(int count)
    {
        _hits = new int[count];
        if (count == 0)
        {
            _allSeen.Set();
        }
    }

    public int Count => _hits.Length;

    /// <summary>Total hits so far, duplicates included.</summary>
    public int Total => Volatile.Read(ref _total);

    public int HitsOf(int index) => Volatile.Read(ref _hits[index]);

    public void Hit(int index)
    {
        Interlocked.Increment(ref _hits[index]);
        if (Interlocked.Increment(ref _total) == _hits.Length)
        {
            _allSeen.Set();
        }
    }

    /// <summary>Waits (bounded) until there have been as many hits as items.</summary>
    public void WaitForAll(string what) =>
        Assert.True(_allSeen.Wait(Waits.MustHappen), $"{what}: only {Total} of {Count} items ran within {Waits.MustHappen.TotalSeconds} s.");

    public void AssertExactlyOnce() => AssertEach(expected: 1, "exactly once");

    /// <summary>Every item ran at most once; returns how many ran.</summary>
    public int AssertAtMostOnce()
    {
        int ran = 0;
        var offenders = new List<string>();
        for (int i = 0; i < _hits.Length; i++)
        {
            int hits = HitsOf(i);
            ran += hits == 0 ? 0 : 1;
            if (hits > 1 && offenders.Count < 10)
            {
                offenders.Add($"#{i} ran {hits} times");
            }
        }
        Assert.True(offenders.Count == 0, "Items ran more than once: " + string.Join(", ", offenders));
        return ran;
    }

    private void AssertEach(int expected, string description)
    {
        int wrong = 0;
        var offenders = new List<string>();
        for (int i = 0; i < _hits.Length; i++)
        {
            int hits = HitsOf(i);
            if (hits != expected)
            {
                wrong++;
                if (offenders.Count < 10)
                {
                    offenders.Add($"#{i} ran {hits} times");
                }
            }
        }
        Assert.True(wrong == 0, $"{wrong} of {_hits.Length} items did not run {description}: {string.Join(", ", offenders)}");
    }

    public void Dispose() => _allSeen.Dispose();
}
