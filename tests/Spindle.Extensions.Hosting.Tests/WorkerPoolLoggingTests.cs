using System;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Xunit;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>Exceptions of work items reach the host's loggers under the Report policy.</summary>
public sealed class WorkerPoolLoggingTests
{
    [Fact]
    public async Task ReportPolicy_ExceptionOfAWorkItem_IsLoggedWithThePoolName_AndThePoolCarriesOn()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.AddWorkerPool("reporting", o => o.ExceptionPolicy = UnhandledExceptionPolicy.Report);
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("reporting");

        var thrown = new InvalidOperationException("work item failure");
        pool.QueueUserWorkItem(_ => throw thrown, null);

        LogEntry entry = logs.WaitForEvent("WorkItemFailed", TestHosts.Generous);
        Assert.Equal(LogLevel.Error, entry.Level);
        Assert.Same(thrown, entry.Exception);
        Assert.Equal("reporting", entry.Values["PoolName"]);
        Assert.Contains("'reporting'", entry.Message, StringComparison.Ordinal);
        Assert.Equal("Spindle.Extensions.Hosting.WorkerPool", entry.Category);

        // The pool goes on with the next item.
        Assert.Equal(7, await pool.Run(() => 7).WaitAsync(TestHosts.Generous));
        await host.StopAsync();
    }

    [Fact]
    public async Task FailProcessPolicy_LeavesTheExceptionToThePoolsHandlers()
    {
        var logs = new CapturingLoggerProvider();
        HostApplicationBuilder builder = TestHosts.CreateBuilder(logs);
        builder.Services.AddWorkerPool("strict");
        using IHost host = builder.Build();
        await host.StartAsync();
        WorkerPool pool = host.Services.GetRequiredKeyedService<WorkerPool>("strict");
        Assert.Equal(UnhandledExceptionPolicy.FailProcess, pool.ExceptionPolicy);

        // A handler that marks the exception handled keeps the process alive; the integration logs nothing of its own.
        using var handled = new ManualResetEventSlim();
        pool.UnhandledException += (_, e) =>
        {
            e.Handled = true;
            handled.Set();
        };
        pool.QueueUserWorkItem(_ => throw new InvalidOperationException("handled by the application"), null);
        Assert.True(handled.Wait(TestHosts.Generous));

        await host.StopAsync();
        Assert.Empty(logs.WithEvent("WorkItemFailed"));
    }
}
