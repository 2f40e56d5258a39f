using System;
using System.Collections.Generic;

namespace Spindle.Compare.Pools;

/// <summary>
/// One pool the program can measure: its id (used on the child command line and as the JSON key), its column title,
/// and how to create it. Adding a peer pool means adding an implementation of <see cref="IPoolUnderTest"/> and an
/// entry in <see cref="All"/>.
/// </summary>
internal sealed class PoolKind
{
    private readonly Func<PoolSettings, IPoolUnderTest> _create;

    private PoolKind(string id, string displayName, Func<PoolSettings, IPoolUnderTest> create)
    {
        Id = id;
        DisplayName = displayName;
        _create = create;
    }

    public static PoolKind Spindle { get; } = new("spindle", "Spindle", settings => new SpindlePool(settings));

    public static PoolKind BuiltIn { get; } = new("builtin", "built-in", _ => new BuiltInPool());

    /// <summary>Every pool, in run order (children alternate through this list) and column order.</summary>
    public static IReadOnlyList<PoolKind> All { get; } = [Spindle, BuiltIn];

    /// <summary>The pool whose advantage the ratio column expresses…</summary>
    public static PoolKind RatioSubject => Spindle;

    /// <summary>…relative to this one.</summary>
    public static PoolKind RatioBaseline => BuiltIn;

    public string Id { get; }

    public string DisplayName { get; }

    public IPoolUnderTest Create(PoolSettings settings) => _create(settings);

    public static PoolKind? Find(string id)
    {
        foreach (PoolKind kind in All)
        {
            if (string.Equals(kind.Id, id, StringComparison.OrdinalIgnoreCase))
            {
                return kind;
            }
        }
        return null;
    }

    public override string ToString() => Id;
}
