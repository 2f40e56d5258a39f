using System;
using System.Collections.Generic;
using System.Linq;
using Mono.Cecil;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// One owner per piece of mutable state: a class's fields are written only by that class's own code (its nested types
/// and lambdas included), and other components change that state through the owner's methods.
/// </summary>
public sealed class OwnershipTests
{
    /// <summary>
    /// Writes into another class's fields, recorded when this test was written; the list only shrinks (see
    /// <see cref="LayeringTests.KnownUpwardUses"/> for how).
    /// </summary>
    internal static readonly string[] KnownForeignWrites =
    [
        "TimingWheel writes TimerNode.Next",
        "TimingWheel writes TimerNode.Previous",
        "WaitRegistry writes RegisteredWait.Handle",
        "WaitRegistry writes RegisteredWait.InPoolList",
        "WaitRegistry writes RegisteredWait.PoolNext",
        "WaitRegistry writes RegisteredWait.PoolPrevious",
        "WaitRegistry writes RegisteredWait.SignalWaiter",
        "WaitThread writes RegisteredWait.WaitThread",
    ];

    /// <summary>Mutable instance fields that other classes can reach, recorded when this test was written; the list only shrinks.</summary>
    internal static readonly string[] KnownOpenMutableFields =
    [
        "RegisteredWait.Handle",
        "RegisteredWait.InPoolList",
        "RegisteredWait.PoolNext",
        "RegisteredWait.PoolPrevious",
        "RegisteredWait.SignalWaiter",
        "RegisteredWait.WaitThread",
        "TimerNode.Next",
        "TimerNode.Previous",
        "Waiter.Linked",
        "Waiter.Next",
        "Waiter.Previous",
    ];

    [Fact]
    public void NoClassWritesAnotherClassesFields()
    {
        var known = new HashSet<string>(KnownForeignWrites, StringComparer.Ordinal);
        var added = LibraryModel.Spindle.Writes.Select(w => w.ToString()).Where(w => !known.Contains(w)).ToList();
        Assert.True(added.Count == 0,
            "Fields written by a class other than their owner (give the owner a method that makes the change):\n"
            + string.Join("\n", added));
    }

    [Fact]
    public void TheKnownForeignWritesAreStillThere()
    {
        var current = new HashSet<string>(LibraryModel.Spindle.Writes.Select(w => w.ToString()), StringComparer.Ordinal);
        var paid = KnownForeignWrites.Where(k => !current.Contains(k)).ToList();
        Assert.True(paid.Count == 0,
            "Foreign writes that no longer exist: remove them from OwnershipTests.KnownForeignWrites:\n" + string.Join("\n", paid));
    }

    [Fact]
    public void ClassesKeepTheirMutableFieldsPrivate()
    {
        var open = OpenMutableFields().ToList();
        var known = new HashSet<string>(KnownOpenMutableFields, StringComparer.Ordinal);
        var added = open.Where(f => !known.Contains(f)).ToList();
        var paid = KnownOpenMutableFields.Where(k => !open.Contains(k)).ToList();
        Assert.True(added.Count == 0 && paid.Count == 0,
            "Mutable instance fields visible outside their class (make them private and give the class methods):\n"
            + string.Join("\n", added)
            + (paid.Count == 0 ? "" : "\nNo longer open: remove from OwnershipTests.KnownOpenMutableFields:\n" + string.Join("\n", paid)));
    }

    /// <summary>
    /// Non-private, non-readonly instance fields of classes other code can name (a struct's fields are its holder's to guard; a
    /// readonly field of a reference type can still be changed through its object, which that object's own rules guard).
    /// </summary>
    internal static IEnumerable<string> OpenMutableFields() =>
        LibraryModel.Spindle.Module.GetTypes()
            .Where(t => t.IsClass && !t.IsValueType && !t.Name.StartsWith('<') && !IsCompilerGenerated(t) && !IsHiddenInOwner(t))
            .SelectMany(t => t.Fields.Where(f => !f.IsStatic && !f.IsPrivate && !f.IsInitOnly && !f.IsLiteral)
                .Select(f => $"{t.Name}.{f.Name}"))
            .OrderBy(s => s, StringComparer.Ordinal);

    /// <summary>A private nested class (a queue's segment, a list's node): only its declaring class reaches its fields.</summary>
    private static bool IsHiddenInOwner(TypeDefinition type) => type.IsNestedPrivate;

    private static bool IsCompilerGenerated(TypeDefinition type) =>
        type.CustomAttributes.Any(a => a.AttributeType.Name == "CompilerGeneratedAttribute");
}
