using System;
using System.IO;

namespace Spindle.Tests;

/// <summary>What the tests that run a program of this repository in a child process share.</summary>
internal static class ChildProcesses
{
    /// <summary>The dotnet host running these tests (the CLI sets DOTNET_HOST_PATH), else the one on the PATH.</summary>
    public static string DotnetHost()
    {
        string? fromCli = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH");
        if (!string.IsNullOrEmpty(fromCli) && File.Exists(fromCli))
        {
            return fromCli;
        }
        string? self = Environment.ProcessPath;
        if (self is not null && Path.GetFileNameWithoutExtension(self).Equals("dotnet", StringComparison.OrdinalIgnoreCase))
        {
            return self;
        }
        return "dotnet";
    }
}
