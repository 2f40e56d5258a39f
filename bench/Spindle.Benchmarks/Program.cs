using BenchmarkDotNet.Running;

namespace Spindle.Benchmarks;

/// <summary>
/// Micro-benchmarks of Spindle's hot paths, each against the built-in pool's equivalent as the baseline (Ratio and
/// Alloc Ratio columns). Run with <c>dotnet run -c Release --project bench/Spindle.Benchmarks -- --filter '*'</c>.
/// </summary>
internal static class Program
{
    private static void Main(string[] args) => BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(args, new BenchmarkConfig());
}
