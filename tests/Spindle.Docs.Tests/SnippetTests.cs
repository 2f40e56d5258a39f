using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using Microsoft.CodeAnalysis;
using Microsoft.CodeAnalysis.CSharp;
using Microsoft.CodeAnalysis.CSharp.Syntax;
using Xunit;

namespace Spindle.Docs.Tests;

/// <summary>
/// Every <c>```csharp</c> block of the README, of docs/ and of the packages' readmes compiles, as a program of its own
/// (top-level statements; a block of declarations alone as a library), against the packages of src/ and what they
/// bring, with the implicit usings of a console app. A snippet that stops compiling fails here, named by file and line.
/// </summary>
public sealed class SnippetTests
{
    private static readonly string s_root = FindRoot();

    private static readonly Lazy<MetadataReference[]> s_references = new(() =>
        ((string)AppContext.GetData("TRUSTED_PLATFORM_ASSEMBLIES")!)
            .Split(Path.PathSeparator, StringSplitOptions.RemoveEmptyEntries)
            .Where(path => !Path.GetFileName(path).StartsWith("Microsoft.CodeAnalysis", StringComparison.Ordinal))
            .Select(path => (MetadataReference)MetadataReference.CreateFromFile(path))
            .ToArray());

    private const string ImplicitUsings = """
        global using System;
        global using System.Collections.Generic;
        global using System.IO;
        global using System.Linq;
        global using System.Net.Http;
        global using System.Threading;
        global using System.Threading.Tasks;
        """;

    /// <summary>A snippet: the file it is in (relative to the repository), the line of its fence, and its code.</summary>
    public sealed record Snippet(string File, int Line, string Code)
    {
        public override string ToString() => $"{File}:{Line}";
    }

    private static string FindRoot()
    {
        for (DirectoryInfo? directory = new(AppContext.BaseDirectory); directory is not null; directory = directory.Parent)
        {
            if (File.Exists(Path.Combine(directory.FullName, "Spindle.slnx")))
            {
                return directory.FullName;
            }
        }
        throw new InvalidOperationException($"No Spindle.slnx above {AppContext.BaseDirectory}.");
    }

    /// <summary>The Markdown files whose snippets must compile.</summary>
    public static IEnumerable<string> DocumentFiles()
    {
        yield return "README.md";
        foreach (string file in Directory.GetFiles(Path.Combine(s_root, "docs"), "*.md").Order(StringComparer.Ordinal))
        {
            yield return Path.GetRelativePath(s_root, file);
        }
        foreach (string file in Directory.GetFiles(Path.Combine(s_root, "src"), "*.md", SearchOption.AllDirectories).Order(StringComparer.Ordinal))
        {
            yield return Path.GetRelativePath(s_root, file);
        }
    }

    /// <summary>The <c>```csharp</c> blocks of <paramref name="relativePath"/>.</summary>
    public static List<Snippet> Extract(string relativePath)
    {
        string[] lines = File.ReadAllLines(Path.Combine(s_root, relativePath));
        var snippets = new List<Snippet>();
        for (int i = 0; i < lines.Length; i++)
        {
            if (lines[i].Trim() != "```csharp")
            {
                continue;
            }
            var code = new StringBuilder();
            int start = i;
            for (i++; i < lines.Length && lines[i].Trim() != "```"; i++)
            {
                code.AppendLine(lines[i]);
            }
            Assert.True(i < lines.Length, $"{relativePath}:{start + 1}: a csharp block is not closed.");
            snippets.Add(new Snippet(relativePath.Replace('\\', '/'), start + 1, code.ToString()));
        }
        return snippets;
    }

    public static TheoryData<string> Documents()
    {
        var data = new TheoryData<string>();
        foreach (string file in DocumentFiles())
        {
            data.Add(file.Replace('\\', '/'));
        }
        return data;
    }

    [Theory]
    [MemberData(nameof(Documents))]
    public void EverySnippet_Compiles(string document)
    {
        var failures = new List<string>();
        foreach (Snippet snippet in Extract(document))
        {
            failures.AddRange(Compile(snippet).Select(d => $"{snippet}: {d}"));
        }
        Assert.True(failures.Count == 0, string.Join(Environment.NewLine, failures));
    }

    [Fact]
    public void TheReadmeAndTheReferencePages_HaveSnippets()
    {
        // The extraction itself works: the README's example and the pages with code are found.
        Assert.NotEmpty(Extract("README.md"));
        foreach (string page in new[] { "tasks", "lanes", "timers-and-waits", "sockets", "aspnetcore", "operating", "actors" })
        {
            Assert.NotEmpty(Extract($"docs/{page}.md"));
        }
    }

    [Fact]
    public void ABrokenSnippet_IsReported()
    {
        var broken = new Snippet("inline", 1, "using Spindle;\nvar pool = new WorkerPool(new WorkerPoolOptions());\npool.NoSuchMethod();\n");
        Assert.Contains(Compile(broken), d => d.Contains("CS1061", StringComparison.Ordinal));
    }

    [Fact]
    public void EveryDocsPage_IsLinkedFromTheReadme()
    {
        string readme = File.ReadAllText(Path.Combine(s_root, "README.md"));
        foreach (string file in Directory.GetFiles(Path.Combine(s_root, "docs"), "*.md"))
        {
            Assert.Contains($"(docs/{Path.GetFileName(file)}", readme, StringComparison.Ordinal);
        }
    }

    [Fact]
    public void TheReadme_FitsOnAFewScreens_AndNamesBothCommands()
    {
        string[] readme = File.ReadAllLines(Path.Combine(s_root, "README.md"));
        Assert.True(readme.Length <= 300, $"README.md has {readme.Length} lines; the reference belongs in docs/.");
        Assert.Contains("dotnet run -c Release --project bench/Spindle.Compare", readme);
        Assert.Contains("dotnet test -c Release", readme);
    }

    [Fact]
    public void TheReadmesResultsTable_IsTheGeneratedHeadlineTable()
    {
        // The comparison program writes bench/results/latest/headline.md with each report (and prints it with
        // --headline-from); the README shows that table, unedited.
        string readme = File.ReadAllText(Path.Combine(s_root, "README.md")).ReplaceLineEndings("\n");
        string headline = File.ReadAllText(Path.Combine(s_root, "bench", "results", "latest", "headline.md")).ReplaceLineEndings("\n");
        Assert.StartsWith("| scenario | variant | headline metric |", headline, StringComparison.Ordinal);
        Assert.Contains("-->\n" + headline + "<!-- end of the headline table -->", readme, StringComparison.Ordinal);
    }

    /// <summary>The snippet's compiler errors (an empty list when it compiles).</summary>
    private static List<string> Compile(Snippet snippet)
    {
        var options = new CSharpParseOptions(LanguageVersion.Latest);
        SyntaxTree code = CSharpSyntaxTree.ParseText(snippet.Code, options, path: snippet.ToString());
        SyntaxTree usings = CSharpSyntaxTree.ParseText(ImplicitUsings, options, path: "ImplicitUsings.cs");
        bool program = code.GetCompilationUnitRoot().Members.OfType<GlobalStatementSyntax>().Any();
        var compilation = CSharpCompilation.Create(
            "Snippet",
            [usings, code],
            s_references.Value,
            new CSharpCompilationOptions(program ? OutputKind.ConsoleApplication : OutputKind.DynamicallyLinkedLibrary,
                nullableContextOptions: NullableContextOptions.Enable, allowUnsafe: true));
        using var output = new MemoryStream();
        return compilation.Emit(output).Diagnostics
            .Where(d => d.Severity == DiagnosticSeverity.Error)
            .Select(d => $"{d.Id} at {d.Location.GetLineSpan().StartLinePosition.Line + 1}: {d.GetMessage(System.Globalization.CultureInfo.InvariantCulture)}")
            .ToList();
    }
}
