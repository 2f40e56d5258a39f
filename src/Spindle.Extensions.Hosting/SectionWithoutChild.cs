using System;
using System.Collections.Generic;
using System.Linq;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.Primitives;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// A configuration section seen without one of its children: a pool's section less its <c>Lanes</c>, which are bound
/// to lanes, not to the pool's options (whose binding rejects keys it does not know).
/// </summary>
internal sealed class SectionWithoutChild(IConfiguration section, string hidden) : IConfiguration
{
    public string? this[string key]
    {
        get => IsHidden(key) ? null : section[key];
        set => section[key] = value;
    }

    public IEnumerable<IConfigurationSection> GetChildren() => section.GetChildren().Where(child => !IsHidden(child.Key));

    public IChangeToken GetReloadToken() => section.GetReloadToken();

    public IConfigurationSection GetSection(string key) => section.GetSection(key);

    private bool IsHidden(string key) => string.Equals(key, hidden, StringComparison.OrdinalIgnoreCase);
}
