using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Net;
using System.Text.Json;
using System.Text.Json.Serialization;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Spindle.Compare.Infrastructure;
using Spindle.Compare.Pools;

namespace Spindle.Compare.Scenarios;

/// <summary>
/// ASP.NET Core on Kestrel: on Spindle's pool, Kestrel runs on Spindle's transport (<c>UseSpindle(pool)</c>: the
/// pool's <c>PoolSocket</c> and its pipes resume on the pool); on the built-in pool, on Kestrel's default sockets
/// transport. The load comes from <see cref="HttpLoadGenerator"/> in the same process: 64 keep-alive connections on
/// a few epoll loops, as wrk drives them (blocking threads where there is no epoll). Variants: <c>plaintext</c> and
/// <c>json</c> (TechEmpower-style responses with a Content-Length, written in one flush), and <c>chunked</c> (the
/// plaintext body without a Content-Length, as a handler that returns a string sends it: the body and the last chunk
/// leave in two flushes): throughput, p99 (of every request, counted in the generator's histograms) and the process's
/// allocation per request (the generator allocates nothing in a run), measured 1 s (3 s with --full) after a warm-up of 250 ms rounds that lasts at least 1 s (2 s)
/// and until a round compiles few methods (at most 5 s, 8 s): the request path is much code, the framework's
/// precompiled and Spindle's not, so a fixed warm-up would measure the one transport's tiering against the other's
/// steady state; <c>starved</c>: after the warm-up, 2,000
/// items that block are queued to the built-in <see cref="ThreadPool"/> (in both children), then each connection sends
/// 20 requests with at most 3 s for all of them: the p99 (a request not answered by the deadline counts as what it had
/// waited) and the failed requests.
/// </summary>
internal sealed partial class HttpScenario : IScenario
{
    private const int Connections = 64;
    private const int BlockedItems = 2_000;
    private const int StarvedRequestsPerConnection = 20;
    private static readonly TimeSpan s_quickWarmup = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_fullWarmup = TimeSpan.FromSeconds(2);
    private static readonly TimeSpan s_warmupRound = TimeSpan.FromMilliseconds(250);
    private static readonly TimeSpan s_quickWarmupLimit = TimeSpan.FromSeconds(5);
    private static readonly TimeSpan s_fullWarmupLimit = TimeSpan.FromSeconds(8);
    private static readonly TimeSpan s_quick = TimeSpan.FromSeconds(1);
    private static readonly TimeSpan s_full = TimeSpan.FromSeconds(3);
    private static readonly TimeSpan s_starvedDeadline = TimeSpan.FromSeconds(3);
    private static readonly byte[] s_hello = "Hello, World!"u8.ToArray();

    private static readonly MetricInfo[] s_loadMetrics =
    [
        new("throughput", "req/s", Better.Higher),
        new("p99", "us", Better.Lower),
        new("alloc", "B/req", Better.Lower, NoiseFloor: 1),
    ];

    private static readonly MetricInfo[] s_starvedMetrics =
    [
        new("p99", "us", Better.Lower),
        new("failed", "req", Better.Lower),
    ];

    public string Id => "http";

    public string Description =>
        $"Kestrel with {Connections} keep-alive connections: Spindle's transport against the default sockets transport "
        + $"(plaintext, json and chunked throughput; starved: {BlockedItems:N0} blocked items in the built-in pool)";

    public IReadOnlyList<string> Variants { get; } = ["plaintext", "json", "chunked", "starved"];

    public IReadOnlyList<MetricInfo> Metrics { get; } = [.. s_loadMetrics, s_starvedMetrics[1]];

    public IReadOnlyList<MetricInfo> MetricsFor(string variant) => variant == "starved" ? s_starvedMetrics : s_loadMetrics;

    public string HeadlineMetric => "p99";

    // Each run starts Kestrel and warms it up (1 s, 2 s with --full), and a built-in starved run waits out the whole
    // deadline: two runs per pool and the shorter warm-up keep the quick run of every scenario under 10 minutes.
    public int? MaxDefaultRuns => 2;

    public Measurement Run(IPoolUnderTest pool, string variant, bool full)
    {
        string path = variant switch
        {
            "plaintext" or "starved" => "/plaintext",
            "json" => "/json",
            "chunked" => "/chunked",
            _ => throw new ArgumentException($"Unknown variant '{variant}'.", nameof(variant)),
        };
        PoolWarmup.StartThreads(pool, Environment.ProcessorCount);
        (WebApplication app, EndPoint endpoint) = StartServer(pool);
        try
        {
            using var load = new HttpLoadGenerator(endpoint, path, Connections);
            Warmup.RepeatUntilJitSettles(() => load.RunFor(s_warmupRound), full ? s_fullWarmup : s_quickWarmup,
                full ? s_fullWarmupLimit : s_quickWarmupLimit);
            return variant == "starved" ? MeasureStarved(load) : MeasureLoad(load, full);
        }
        finally
        {
            app.StopAsync().WaitAsync(Waits.Stuck).GetAwaiter().GetResult();
            ((IDisposable)app).Dispose();
        }
    }

    private static Measurement MeasureLoad(HttpLoadGenerator load, bool full)
    {
        GcSnapshot.CollectFully();
        GcSnapshot before = GcSnapshot.Take();
        (long requests, double seconds, LatencyHistogram latencies) = load.RunFor(full ? s_full : s_quick);
        GcSnapshot used = GcSnapshot.Take() - before;
        return new Measurement { Items = requests }
            .Set("throughput", requests / seconds)
            .Set("p99", latencies.Count == 0 ? double.NaN : latencies.Percentile(99))
            .Set("alloc", (double)used.AllocatedBytes / Math.Max(1, requests));
    }

    private static Measurement MeasureStarved(HttpLoadGenerator load)
    {
        // Never disposed: blocked items that have not started when the run ends still wait on it.
        var gate = new ManualResetEventSlim();
        for (int i = 0; i < BlockedItems; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static g => ((ManualResetEventSlim)g!).Wait(), gate);
        }
        Thread.Sleep(50); // let the built-in pool's threads take blocked items
        long triggered = Stopwatch.GetTimestamp();
        (LatencyHistogram latencies, int failed) = load.RunCount(StarvedRequestsPerConnection, triggered, triggered + Pacer.Ticks(s_starvedDeadline));
        gate.Set();
        return new Measurement { Items = Connections * StarvedRequestsPerConnection }
            .Set("p99", latencies.Percentile(99))
            .Set("failed", failed);
    }

    private static (WebApplication App, EndPoint Endpoint) StartServer(IPoolUnderTest pool)
    {
        WebApplicationBuilder builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(static options =>
        {
            options.AddServerHeader = false;
            options.Listen(IPAddress.Loopback, 0);
        });
        if (pool.SpindleTarget is WorkerPool spindle)
        {
            builder.WebHost.UseSpindle(spindle);
        }
        WebApplication app = builder.Build();
        app.MapGet("/plaintext", static (HttpContext context) =>
        {
            context.Response.ContentType = "text/plain";
            context.Response.ContentLength = s_hello.Length;
            return context.Response.Body.WriteAsync(s_hello).AsTask();
        });
        app.MapGet("/json", static (HttpContext context) =>
        {
            byte[] body = JsonSerializer.SerializeToUtf8Bytes(new JsonMessage("Hello, World!"), HttpJsonContext.Default.JsonMessage);
            context.Response.ContentType = "application/json";
            context.Response.ContentLength = body.Length;
            return context.Response.Body.WriteAsync(body).AsTask();
        });
        app.MapGet("/chunked", static (HttpContext context) =>
        {
            // No Content-Length: the body goes out as a chunk, and the last chunk in a second flush when the handler ends.
            context.Response.ContentType = "text/plain";
            return context.Response.Body.WriteAsync(s_hello).AsTask();
        });
        app.StartAsync().WaitAsync(Waits.Stuck).GetAwaiter().GetResult();
        string address = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First();
        var uri = new Uri(address);
        return (app, new IPEndPoint(IPAddress.Loopback, uri.Port));
    }

    internal sealed record JsonMessage(string Message);

    [JsonSerializable(typeof(JsonMessage))]
    [JsonSourceGenerationOptions(PropertyNamingPolicy = JsonKnownNamingPolicy.CamelCase)]
    internal sealed partial class HttpJsonContext : JsonSerializerContext;
}
