using System;
using System.Linq;
using Mono.Cecil;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// The two classes every change passes through stay small in state: a worker groups its state by concern into parts it
/// embeds, and the façade wires components instead of holding their state. Compiler-made fields (an auto-property's
/// backing field, a primary constructor's captured parameter) count: they are state like any other.
/// </summary>
public sealed class ComponentSizeTests
{
    [Theory]
    [InlineData("Spindle.Scheduling.Worker", 15)]
    [InlineData("Spindle.WorkerPool", 12)]
    public void AClassKeepsItsInstanceFieldsWithinItsBudget(string typeName, int budget)
    {
        TypeDefinition type = LibraryModel.Spindle.Module.GetType(typeName)
            ?? throw new InvalidOperationException($"{typeName} is not in the library.");
        var fields = type.Fields.Where(f => !f.IsStatic && !f.IsLiteral).Select(f => f.Name).ToList();
        Assert.True(fields.Count <= budget,
            $"{typeName} has {fields.Count} instance fields, more than its {budget} (group state by concern into a part the " +
            "class embeds, or move it to the component that decides about it):\n" + string.Join("\n", fields));
        Assert.NotEmpty(fields); // a model that read no fields would pass vacuously
    }
}
