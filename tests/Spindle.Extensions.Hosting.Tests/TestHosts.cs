using System;
using System.Collections.Generic;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>Builds real hosts for the tests: no default sources or providers, in-memory configuration, captured logs.</summary>
internal static class TestHosts
{
    public static readonly TimeSpan Generous = TimeSpan.FromSeconds(30);

    public static HostApplicationBuilder CreateBuilder(CapturingLoggerProvider? logs = null, IDictionary<string, string?>? configuration = null)
    {
        HostApplicationBuilder builder = Host.CreateEmptyApplicationBuilder(new HostApplicationBuilderSettings());
        if (configuration is not null)
        {
            builder.Configuration.AddInMemoryCollection(configuration);
        }
        builder.Logging.SetMinimumLevel(LogLevel.Trace);
        if (logs is not null)
        {
            builder.Logging.AddProvider(logs);
        }
        return builder;
    }
}
