using System.Collections.Generic;
using System.IO;
using System.Linq;
using Xunit;

namespace Spindle.Tests.Architecture;

/// <summary>
/// No source file of the libraries passes <see cref="MaxLines"/> lines: a type that grows past it splits by concern
/// (<c>Type.Concern.cs</c>) or, better, into types that each own a part of its state.
/// </summary>
public sealed class FileSizeTests
{
    internal const int MaxLines = 500;

    [Fact]
    public void NoSourceFileIsLongerThanTheLimit()
    {
        string src = Path.Combine(LibraryModel.RepositoryRoot(), "src");
        var failures = new List<string>();
        foreach (string file in LibraryModel.SourceFiles(src))
        {
            int lines = File.ReadLines(file).Count();
            if (lines > MaxLines)
            {
                failures.Add($"{Path.GetRelativePath(src, file).Replace('\\', '/')}: {lines} lines, over {MaxLines}");
            }
        }
        Assert.True(failures.Count == 0, string.Join("\n", failures));
    }

    [Fact]
    public void TheSourceTreeIsFound()
    {
        // The rule above would pass vacuously on an empty tree: the library's own files must be among those it reads.
        string src = Path.Combine(LibraryModel.RepositoryRoot(), "src");
        Assert.Contains(LibraryModel.SourceFiles(src), f => f.EndsWith("WorkerPool.cs", System.StringComparison.Ordinal));
    }
}
