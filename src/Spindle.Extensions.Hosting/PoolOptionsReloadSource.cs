using System;
using System.Threading;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;
using Microsoft.Extensions.Primitives;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Tells <see cref="IOptionsMonitor{TOptions}"/> when the configuration a pool's options are bound from has reloaded
/// with options that build, so that the monitor rebinds them and calls its change listeners (the hosted service's,
/// which applies new thread limits).
/// </summary>
/// <remarks>
/// The monitor rebinds inside the configuration's change callback: options that do not build there (a value that
/// does not convert, a key the options do not have, another <c>Name</c>) would throw out of the code that reloaded the
/// configuration (<c>IConfigurationRoot.Reload</c>, a file watcher's callback), log nothing, and leave the monitor
/// without the pool's options. So this source watches the configuration itself, builds the options aside first
/// (<see cref="IOptionsFactory{TOptions}"/>, as the monitor would), and signals the monitor only when they build;
/// otherwise it logs the failure (<c>OptionsReloadFailed</c>) and the monitor, the pool and its limits keep what they
/// had. A second reload between the check and the monitor's rebinding can still fail the rebinding (or a listener of
/// the monitor can throw): that is caught and logged too (<c>OptionsReloadListenerFailed</c>).
/// </remarks>
internal sealed class PoolOptionsReloadSource : IOptionsChangeTokenSource<WorkerPoolOptions>, IDisposable
{
    private readonly IServiceProvider _services;
    private readonly Lock _gate = new();
    private readonly IDisposable _watch;
    // The token the monitor holds; replaced, then cancelled, once per reload that builds. Never disposed: it has no
    // timer and nothing reads its wait handle, and the monitor may still register on a token it has just read.
    private CancellationTokenSource _changed = new();

    public PoolOptionsReloadSource(string name, IConfiguration configuration, IServiceProvider services)
    {
        Name = name;
        _services = services;
        _watch = ChangeToken.OnChange(configuration.GetReloadToken, OnReload);
    }

    public string Name { get; }

    public IChangeToken GetChangeToken()
    {
        lock (_gate)
        {
            return new CancellationChangeToken(_changed.Token);
        }
    }

    public void Dispose() => _watch.Dispose();

    private void OnReload()
    {
        try
        {
            _services.GetRequiredService<IOptionsFactory<WorkerPoolOptions>>().Create(Name);
        }
        catch (Exception ex) when (ex is ArgumentException or InvalidOperationException or FormatException or OptionsValidationException)
        {
            Log.OptionsReloadFailed(Logger, Name, ex);
            return;
        }
        CancellationTokenSource changed;
        lock (_gate)
        {
            // The monitor reads the next token before it rebinds, so a reload during its rebinding is not missed.
            changed = _changed;
            _changed = new CancellationTokenSource();
        }
        try
        {
            changed.Cancel();
        }
        catch (AggregateException ex)
        {
            Log.OptionsReloadListenerFailed(Logger, Name, ex);
        }
    }

    /// <summary>The hosted service's category, where the other reload messages go.</summary>
    private ILogger Logger =>
        (ILogger?)_services.GetService<ILoggerFactory>()?.CreateLogger<WorkerPoolHostedService>() ?? NullLogger.Instance;
}
