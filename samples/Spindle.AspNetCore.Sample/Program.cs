// ASP.NET Core on Spindle, in one command:
//
//   dotnet run --project samples/Spindle.AspNetCore.Sample -- --demo
//
// starves the built-in thread pool with 2,000 blocked items and shows what still answers (then exits). Without
// --demo it serves on http://localhost:5080 until Ctrl+C:
//   curl http://localhost:5080/                  answered on the "kestrel" pool (Spindle's transport)
//   curl http://localhost:5080/admin/health      on the High lane "admin" of the pool "handlers"
//   curl -i http://localhost:5080/report         on the lane "reports": 2 at a time, 4 waiting, then 503 + Retry-After
using System;
using System.Threading;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Spindle;
using Spindle.AspNetCore.Sample;

bool demo = Array.IndexOf(args, "--demo") >= 0;
WebApplicationBuilder builder = WebApplication.CreateBuilder(args);
builder.Logging.AddFilter("Microsoft.AspNetCore", LogLevel.Warning);
builder.WebHost.UseUrls(demo ? "http://127.0.0.1:0" : "http://localhost:5080");
builder.WebHost.UseSpindle(static pool => pool.MaxThreads = 2 * Environment.ProcessorCount);
builder.Services.AddWorkerPool("handlers")
    .AddLane("admin", static lane => lane.Priority = LanePriority.High)
    .AddLane("reports", static lane =>
    {
        lane.MaxConcurrency = 2;
        lane.QueueLimit = 4;
    });
WebApplication app = builder.Build();

app.MapGet("/", static () => $"Hello from {WorkerPool.Current?.Name ?? "the built-in pool"}\n");
app.MapGroup("/admin").RunOnLane("admin").MapGet("/health", static () => $"ok, on lane {WorkerPoolLane.Current?.Name}\n");
app.MapGet("/report", static () =>
{
    Thread.Sleep(2_000); // a slow report, holding one of the lane's two slots
    return $"report, on lane {WorkerPoolLane.Current?.Name}\n";
}).RunOnLane("reports", retryAfterSeconds: 2);

if (demo)
{
    // Synchronous on purpose: nothing here may wait for the built-in pool it is about to starve.
    app.StartAsync().GetAwaiter().GetResult();
    StarvationDemo.Run(app);
    app.StopAsync().GetAwaiter().GetResult();
}
else
{
    app.Run();
}
