using System;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using Spindle.Compare.Scenarios;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The scenarios without thread sampling (ThreadSampling.Off): the README names them, and each is a scenario.</summary>
public sealed partial class ThreadSamplingTests
{
    private static readonly string s_program = Path.Combine(FindRoot(), "bench", "Spindle.Compare");

    [Fact]
    public void TheReadme_NamesTheScenariosWithoutSampling_AsTheListDoes()
    {
        // "(sampled every 10 ms, except in `a`, `b` and `c`, which that sampling would disturb ..."
        string readme = string.Join(' ', File.ReadAllText(Path.Combine(s_program, "README.md")).Split((char[])['\r', '\n', ' '], StringSplitOptions.RemoveEmptyEntries));
        Match sentence = SamplingSentence().Match(readme);
        Assert.True(sentence.Success, "The README no longer says where the thread count is not sampled.");

        string[] named = Code().Matches(sentence.Groups["list"].Value).Select(m => m.Groups[1].Value).ToArray();

        Assert.Equal(ThreadSampling.Off, named);
    }

    [Fact]
    public void EveryScenarioWithoutSampling_IsAScenarioOfTheProgram()
    {
        string[] ids = Directory.GetFiles(Path.Combine(s_program, "Scenarios"), "*Scenario.cs")
            .SelectMany(file => ScenarioId().Matches(File.ReadAllText(file)).Select(m => m.Groups[1].Value))
            .ToArray();

        Assert.All(ThreadSampling.Off, id => Assert.Contains(id, ids));
    }

    [Theory]
    [InlineData("fork-join", false)]
    [InlineData("Cold-Start", false)]
    [InlineData("queue-drain", true)]
    public void AllowedIn_IsFalseOnlyForTheListedScenarios(string id, bool allowed) =>
        Assert.Equal(allowed, ThreadSampling.AllowedIn(id));

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

    [GeneratedRegex(@"sampled every 10 ms, except in (?<list>.*?), which that sampling would disturb")]
    private static partial Regex SamplingSentence();

    [GeneratedRegex("`([^`]+)`")]
    private static partial Regex Code();

    [GeneratedRegex(@"public string Id => ""([^""]+)"";")]
    private static partial Regex ScenarioId();
}
