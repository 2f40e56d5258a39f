using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Options;
using Microsoft.Extensions.Primitives;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Tells <see cref="IOptionsMonitor{TOptions}"/> when the configuration a named options instance is bound from reloads,
/// so that the monitor rebinds it and calls its change listeners (the hosted service's, which applies new thread limits).
/// </summary>
internal sealed class SectionChangeTokenSource<TOptions>(string name, IConfiguration configuration) : IOptionsChangeTokenSource<TOptions>
{
    public string Name { get; } = name;

    public IChangeToken GetChangeToken() => configuration.GetReloadToken();
}
