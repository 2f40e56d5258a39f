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
    [Fact]
    public void NoClassWritesAnotherClassesFields()
    {
        var foreign = LibraryModel.Spindle.Writes.Select(w => w.ToString()).ToList();
        Assert.True(foreign.Count == 0,
            "Fields written by a class other than their owner (give the owner a method that makes the change):\n"
            + string.Join("\n", foreign));
    }

    [Fact]
    public void ClassesKeepTheirMutableFieldsPrivate()
    {
        var open = OpenMutableFields().ToList();
        Assert.True(open.Count == 0,
            "Mutable instance fields visible outside their class (make them private and give the class methods):\n"
            + string.Join("\n", open));
    }

    [Fact]
    public void TheModelSeesWritesAndFields()
    {
        // The rules above would pass vacuously on a model that read nothing: the library's own classes, fields and
        // stores must be in it (the worker's own stores into its fields are not foreign, but they are stores).
        TypeDefinition worker = LibraryModel.Spindle.Folders.Keys.Single(t => t.Name == "Worker");
        Assert.Equal("Scheduling", LibraryModel.Spindle.Folders[worker]);
        Assert.Contains(worker.Fields, f => !f.IsStatic && !f.IsInitOnly);
        Assert.Contains(worker.Methods.Where(m => m.HasBody).SelectMany(m => m.Body.Instructions),
            i => i.OpCode == Mono.Cecil.Cil.OpCodes.Stfld);
    }

    /// <summary>
    /// Non-private, non-readonly instance fields of classes other code can name (a struct's fields are its holder's to
    /// guard; a readonly field of a reference type can still be changed through its object, which that object's own
    /// rules guard; a private nested class is reached only by its declaring class).
    /// </summary>
    internal static IEnumerable<string> OpenMutableFields() =>
        LibraryModel.Spindle.Module.GetTypes()
            .Where(t => t.IsClass && !t.IsValueType && !t.Name.StartsWith('<') && !IsCompilerGenerated(t) && !t.IsNestedPrivate)
            .SelectMany(t => t.Fields.Where(f => !f.IsStatic && !f.IsPrivate && !f.IsInitOnly && !f.IsLiteral)
                .Select(f => $"{t.Name}.{f.Name}"))
            .OrderBy(s => s, StringComparer.Ordinal);

    private static bool IsCompilerGenerated(TypeDefinition type) =>
        type.CustomAttributes.Any(a => a.AttributeType.Name == "CompilerGeneratedAttribute");
}
