using System;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using Mono.Cecil;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// The two classes every change passes through stay small: a worker groups its state by concern into parts it holds,
/// and the façade wires components instead of holding their state. Compiler-made fields (an auto-property's backing
/// field, a primary constructor's captured parameter) count: they are state like any other. The worker's code, all its
/// partial files together, stays within a line budget: a concern that grows moves into a type of its own.
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

    [Fact]
    public void TheWorkerKeepsItsCodeWithinItsLineBudget()
    {
        const int budget = 400;
        string src = Path.Combine(LibraryModel.RepositoryRoot(), "src", "Spindle");
        var partial = new Regex(@"\bpartial\s+class\s+Worker\b(?![\w.])", RegexOptions.CultureInvariant);
        var files = LibraryModel.SourceFiles(src).Where(f => partial.IsMatch(File.ReadAllText(f))).ToList();
        Assert.Contains(files, f => f.EndsWith("Worker.cs", StringComparison.Ordinal)); // the rule must see the class
        var sizes = files.Select(f => (File: Path.GetFileName(f), Lines: File.ReadLines(f).Count())).ToList();
        int total = sizes.Sum(s => s.Lines);
        Assert.True(total <= budget,
            $"Worker has {total} lines over its files, more than its {budget} (move a concern into a type of its own):\n" +
            string.Join("\n", sizes.Select(s => $"{s.File}: {s.Lines}")));
    }
}
