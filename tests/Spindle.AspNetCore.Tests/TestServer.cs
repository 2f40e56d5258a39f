using System;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Spindle.AspNetCore.Tests;

/// <summary>A real Kestrel host on a loopback port chosen by the system, and an HTTP client for it.</summary>
internal sealed class TestServer : IAsyncDisposable
{
    /// <summary>How long a test waits for something that must happen.</summary>
    public static readonly TimeSpan Generous = TimeSpan.FromSeconds(30);

    private TestServer(WebApplication app, Uri address)
    {
        App = app;
        Address = address;
    }

    public WebApplication App { get; }

    public Uri Address { get; }

    /// <summary>
    /// Builds and starts a host: <paramref name="configure"/> registers services and the transport (every test says
    /// which), <paramref name="map"/> maps its endpoints; Kestrel listens on 127.0.0.1, port 0, unless
    /// <paramref name="listen"/> says otherwise.
    /// </summary>
    public static async Task<TestServer> StartAsync(Action<WebApplicationBuilder> configure, Action<WebApplication> map,
        Action<KestrelServerOptions>? listen = null)
    {
        WebApplicationBuilder builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(listen ?? (static options => options.Listen(IPAddress.Loopback, 0)));
        configure(builder);
        WebApplication app = builder.Build();
        map(app);
        try
        {
            await app.StartAsync().WaitAsync(Generous);
        }
        catch
        {
            await app.DisposeAsync();
            throw;
        }
        string address = app.Services.GetRequiredService<IServer>().Features.GetRequiredFeature<IServerAddressesFeature>().Addresses.First();
        return new TestServer(app, new Uri(address.Replace("[::]", "127.0.0.1", StringComparison.Ordinal)));
    }

    /// <summary>A client of its own (its own connections), with <paramref name="connections"/> connections at most.</summary>
    public HttpClient CreateClient(int connections = int.MaxValue) =>
        new(new SocketsHttpHandler { MaxConnectionsPerServer = connections, PooledConnectionLifetime = Generous * 4 })
        {
            BaseAddress = Address,
            Timeout = Generous,
        };

    public async ValueTask DisposeAsync()
    {
        await App.StopAsync().WaitAsync(Generous);
        await App.DisposeAsync();
    }
}
