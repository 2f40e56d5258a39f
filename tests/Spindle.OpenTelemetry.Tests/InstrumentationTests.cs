using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using OpenTelemetry;
using OpenTelemetry.Metrics;
using Spindle;
using Xunit;

namespace Spindle.OpenTelemetry.Tests;

/// <summary>
/// The Spindle meter through the OpenTelemetry SDK, as an application exports it: a meter provider with
/// <c>AddSpindleInstrumentation()</c> and the in-memory exporter, read after a flush.
/// </summary>
public sealed class InstrumentationTests
{
    private static readonly TimeSpan MustHappen = TimeSpan.FromSeconds(30);

    private static WorkerPool RunItems(string name, int count)
    {
        var pool = new WorkerPool(new WorkerPoolOptions { Name = name, MinThreads = 1, MaxThreads = 2, ExceptionPolicy = UnhandledExceptionPolicy.Report });
        using var done = new CountdownEvent(count);
        for (int i = 0; i < count; i++)
        {
            // Longer than the histograms' sampling pace (100 µs), so that items are timed.
            pool.QueueUserWorkItem(static d =>
            {
                Thread.Sleep(1);
                ((CountdownEvent)d!).Signal();
            }, done);
        }
        Assert.True(done.Wait(MustHappen), "The items did not run.");
        return pool;
    }

    // Snapshots, not the SDK's Metric objects: those are reused by the next collection (the provider's last one, as it
    // is disposed, comes after the pool has stopped).
    private static MetricSnapshot Find(List<MetricSnapshot> metrics, string name) =>
        metrics.FirstOrDefault(m => m.Name == name) ?? throw new Xunit.Sdk.XunitException(
            $"No metric {name} was exported; the export held: {string.Join(", ", metrics.Select(m => m.Name).Distinct())}");

    private static List<MetricPoint> PointsOf(MetricSnapshot metric, string pool)
    {
        var points = new List<MetricPoint>();
        foreach (MetricPoint point in metric.MetricPoints)
        {
            if (TagOf(point, "spindle.pool.name") == pool)
            {
                points.Add(point);
            }
        }
        return points;
    }

    private static string? TagOf(in MetricPoint point, string key)
    {
        foreach (KeyValuePair<string, object?> tag in point.Tags)
        {
            if (tag.Key == key)
            {
                return tag.Value as string;
            }
        }
        return null;
    }

    [Fact]
    public void TheRunTimeHistogram_IsExportedWithTheAdvisedBuckets()
    {
        var exported = new List<MetricSnapshot>();
        string name = $"{nameof(InstrumentationTests)}-{Guid.NewGuid():N}";
        using (MeterProvider meters = Sdk.CreateMeterProviderBuilder().AddSpindleInstrumentation().AddInMemoryExporter(exported).Build())
        {
            using WorkerPool pool = RunItems(name, 50);
            Assert.True(meters.ForceFlush((int)MustHappen.TotalMilliseconds));
        }

        foreach (string histogram in new[] { "spindle.pool.work_item.duration", "spindle.pool.work_item.wait.duration" })
        {
            MetricSnapshot metric = Find(exported, histogram);
            Assert.Equal(MetricType.Histogram, metric.MetricType);
            Assert.Equal("s", metric.Unit);
            List<MetricPoint> points = PointsOf(metric, name);
            Assert.NotEmpty(points);
            var bounds = new List<double>();
            long count = 0;
            foreach (HistogramBucket bucket in points[0].GetHistogramBuckets())
            {
                bounds.Add(bucket.ExplicitBound);
                count += bucket.BucketCount;
            }
            // The advice (1 µs ... 10 s), then the SDK's overflow bucket, not the SDK's defaults (0, 5, 10 ... 10,000).
            Assert.Equal(1e-6, bounds[0]);
            Assert.Equal(10, bounds[^2]);
            Assert.Equal(double.PositiveInfinity, bounds[^1]);
            Assert.True(count > 0, $"{histogram}: no measurement of pool {name} in its buckets");
            Assert.Equal(points[0].GetHistogramCount(), count);
        }
    }

    [Fact]
    public void PoolCountersAndFailures_AreExported()
    {
        var exported = new List<MetricSnapshot>();
        string name = $"{nameof(InstrumentationTests)}-{Guid.NewGuid():N}";
        using (MeterProvider meters = Sdk.CreateMeterProviderBuilder().AddSpindleInstrumentation().AddInMemoryExporter(exported).Build())
        {
            using WorkerPool pool = RunItems(name, 10);
            using var reported = new ManualResetEventSlim();
            pool.UnhandledException += (_, _) => reported.Set();
            pool.QueueUserWorkItem(static _ => throw new InvalidOperationException("exported"));
            Assert.True(reported.Wait(MustHappen), "The exception was not reported.");
            Assert.True(SpinWait.SpinUntil(() => pool.CompletedWorkItemCount == 11, MustHappen), "The items did not complete.");
            Assert.True(meters.ForceFlush((int)MustHappen.TotalMilliseconds));
        }

        MetricPoint completed = Assert.Single(PointsOf(Find(exported, "spindle.pool.work_item.count"), name));
        Assert.Equal(11, completed.GetSumLong());
        MetricPoint exception = Assert.Single(PointsOf(Find(exported, "spindle.pool.work_item.exception.count"), name));
        Assert.Equal(1, exception.GetSumLong());
        Assert.Equal(typeof(InvalidOperationException).FullName, TagOf(exception, "error.type"));
        Assert.NotEmpty(PointsOf(Find(exported, "spindle.pool.thread.added.count"), name));
    }

    [Fact]
    public void ANullBuilder_IsRejected() =>
        Assert.Throws<ArgumentNullException>("builder", () => SpindleMeterProviderBuilderExtensions.AddSpindleInstrumentation(null!));
}
