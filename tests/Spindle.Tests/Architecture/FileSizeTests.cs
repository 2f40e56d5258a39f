using System;
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

    /// <summary>
    /// Files over the limit when this test was written, with their length then: each may shrink, none may grow, and
    /// one back under the limit leaves the list.
    /// </summary>
    internal static readonly Dictionary<string, int> KnownLongFiles = new(StringComparer.Ordinal)
    {
        ["Spindle/Queues/GlobalQueue.cs"] = 562,
        ["Spindle/Threading/ThreadController.cs"] = 510,
        ["Spindle/Threading/OutsideRelief.cs"] = 542,
        ["Spindle/IO/PoolSocket.cs"] = 685,
        ["Spindle/Timers/TimerService.cs"] = 628,
        ["Spindle/Timers/PoolTimer.cs"] = 520,
    };

    [Fact]
    public void NoSourceFileIsLongerThanTheLimit()
    {
        string src = Path.Combine(LibraryModel.RepositoryRoot(), "src");
        var failures = new List<string>();
        var seen = new HashSet<string>(StringComparer.Ordinal);
        foreach (string file in LibraryModel.SourceFiles(src))
        {
            string relative = Path.GetRelativePath(src, file).Replace('\\', '/');
            int lines = File.ReadLines(file).Count();
            if (KnownLongFiles.TryGetValue(relative, out int recorded))
            {
                seen.Add(relative);
                if (lines > recorded)
                {
                    failures.Add($"{relative}: {lines} lines, more than the {recorded} recorded (split it instead)");
                }
                else if (lines <= MaxLines)
                {
                    failures.Add($"{relative}: {lines} lines, back under {MaxLines}: remove it from KnownLongFiles");
                }
            }
            else if (lines > MaxLines)
            {
                failures.Add($"{relative}: {lines} lines, over {MaxLines}");
            }
        }
        failures.AddRange(KnownLongFiles.Keys.Where(k => !seen.Contains(k)).Select(k => $"{k}: listed in KnownLongFiles but gone"));
        Assert.True(failures.Count == 0, string.Join("\n", failures));
    }
}
