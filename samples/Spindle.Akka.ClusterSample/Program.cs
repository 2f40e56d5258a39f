using System;
using System.Threading.Tasks;
using Spindle.Akka.ClusterSample;

// Two Akka.NET cluster nodes in one process, each with ping-pong actors and actors that block 100 ms per message,
// run once on the default dispatcher (the built-in thread pool) and once on Spindle, printing what each node's
// failure detector saw of the other. Usage: dotnet run -c Release --project samples/Spindle.Akka.ClusterSample [seconds] [blocking actors per node]
int seconds = args.Length > 0 ? int.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 15;
int blocking = args.Length > 1 ? int.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture) : 16 * Environment.ProcessorCount;
Console.WriteLine($"{Environment.ProcessorCount} cores; {seconds} s of load per run; {blocking} blocking actors and {2 * Environment.ProcessorCount} ping-pong pairs per node");
foreach (bool onSpindle in new[] { false, true })
{
    HeartbeatReport report = await HeartbeatRun.RunAsync(onSpindle, TimeSpan.FromSeconds(seconds), blocking);
    Console.WriteLine(report);
}
