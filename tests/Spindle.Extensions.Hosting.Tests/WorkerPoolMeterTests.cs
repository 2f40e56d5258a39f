using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>A hosted pool's meter comes from the container's <see cref="IMeterFactory"/>.</summary>
public sealed class WorkerPoolMeterTests
{
    [Fact]
    public async Task AHostedPoolsMeter_IsTheContainersAndEndsWithIt()
    {
        string name = $"meter-{Guid.NewGuid():N}";
        var scopes = new List<object?>();
        var unpublished = new List<string>();
        using var listener = new MeterListener
        {
            InstrumentPublished = (instrument, l) =>
            {
                if (instrument.Meter.Name == "Spindle" && instrument.Name == "spindle.pool.thread.count")
                {
                    lock (scopes)
                    {
                        scopes.Add(instrument.Meter.Scope);
                    }
                    l.EnableMeasurementEvents(instrument);
                }
            },
            MeasurementsCompleted = (instrument, _) =>
            {
                lock (unpublished)
                {
                    unpublished.Add(instrument.Name);
                }
            },
        };
        listener.Start();
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool(name);
        IHost host = builder.Build();
        await host.StartAsync();
        IMeterFactory factory = host.Services.GetRequiredService<IMeterFactory>();

        lock (scopes)
        {
            Assert.Contains(factory, scopes);
        }

        await host.StopAsync();
        host.Dispose();
        lock (unpublished)
        {
            Assert.Contains("spindle.pool.thread.count", unpublished);
        }
    }

    [Fact]
    public async Task OptionsThatNameAFactory_KeepIt()
    {
        string name = $"meter-{Guid.NewGuid():N}";
        using var own = new OwnFactory();
        HostApplicationBuilder builder = TestHosts.CreateBuilder();
        builder.Services.AddWorkerPool(name, options => options.MeterFactory = own);
        using IHost host = builder.Build();
        await host.StartAsync();

        Assert.Equal(1, own.Created);
        await host.StopAsync();
    }

    private sealed class OwnFactory : IMeterFactory
    {
        private readonly List<Meter> _meters = [];

        public int Created => _meters.Count;

        public Meter Create(MeterOptions options)
        {
            var meter = new Meter(options.Name, options.Version, options.Tags, this);
            _meters.Add(meter);
            return meter;
        }

        public void Dispose()
        {
            foreach (Meter meter in _meters)
            {
                meter.Dispose();
            }
        }
    }
}
