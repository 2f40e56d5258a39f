using System;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Options;
using Spindle.AspNetCore.Transport;
using Xunit;

namespace Spindle.AspNetCore.Tests;

/// <summary>UseSpindle's registration, the endpoints the transport takes or leaves to Kestrel's own, and the options.</summary>
public sealed class TransportRegistrationTests
{
    [Fact]
    public async Task UseSpindle_WithAPoolNameNobodyRegistered_FailsTheStartNamingIt()
    {
        InvalidOperationException e = await Assert.ThrowsAsync<InvalidOperationException>(() => TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle("missing"),
            static app => app.MapGet("/", static () => "x")));

        Assert.Contains("'missing'", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void UseSpindle_Twice_Throws()
    {
        WebApplicationBuilder builder = WebApplication.CreateSlimBuilder();
        builder.WebHost.UseSpindle();

        Assert.Throws<InvalidOperationException>(() => builder.WebHost.UseSpindle("other"));
    }

    [Fact]
    public void UseSpindle_WithBadArguments_ThrowsAtTheCall()
    {
        WebApplicationBuilder builder = WebApplication.CreateSlimBuilder();

        Assert.Throws<ArgumentNullException>(() => SpindleWebHostBuilderExtensions.UseSpindle(null!));
        Assert.Throws<ArgumentException>(() => builder.WebHost.UseSpindle(""));
        Assert.Throws<ArgumentNullException>(() => builder.WebHost.UseSpindle((string)null!));
    }

    [Fact]
    public void Factory_TakesIpEndpointsWithThePoolDriver_AndLeavesTheRestToKestrel()
    {
        using ServiceProvider services = new ServiceCollection().BuildServiceProvider();
        var withDriver = new SpindleTransportFactory(Options.Create(new SpindleTransportOptions()), services, null, hasPoolDriver: true);
        var withoutDriver = new SpindleTransportFactory(Options.Create(new SpindleTransportOptions()), services, null, hasPoolDriver: false);
        var forced = new SpindleTransportFactory(Options.Create(new SpindleTransportOptions { BindWithoutPoolDriver = true }), services, null,
            hasPoolDriver: false);
        var ip = new IPEndPoint(IPAddress.Loopback, 0);
        var unix = new UnixDomainSocketEndPoint("/tmp/spindle-test.sock");

        Assert.True(withDriver.CanBind(ip));
        Assert.False(withDriver.CanBind(unix));
        Assert.False(withoutDriver.CanBind(ip));
        Assert.True(forced.CanBind(ip));
        Assert.False(forced.CanBind(new DnsEndPoint("localhost", 80)));
    }

    [Fact]
    public async Task UnixSocketEndpoint_BesideTheTransport_IsServedByKestrelsOwnTransport()
    {
        string path = Path.Combine(Path.GetTempPath(), $"spindle-{Guid.NewGuid():N}.sock");
        await using TestServer server = await TestServer.StartAsync(
            static builder => builder.WebHost.UseSpindle(),
            static app => app.MapGet("/", static (Microsoft.AspNetCore.Http.HttpContext context) => context.Connection.Id),
            listen: options =>
            {
                options.Listen(IPAddress.Loopback, 0);
                options.ListenUnixSocket(path);
            });
        using var client = new HttpClient(new SocketsHttpHandler
        {
            ConnectCallback = async (_, token) =>
            {
                var socket = new Socket(AddressFamily.Unix, SocketType.Stream, ProtocolType.Unspecified);
                await socket.ConnectAsync(new UnixDomainSocketEndPoint(path), token);
                return new NetworkStream(socket, ownsSocket: true);
            },
        });

        string id = await client.GetStringAsync(new Uri("http://localhost/"));

        Assert.False(string.IsNullOrEmpty(id));
        File.Delete(path);
    }

    [Fact]
    public void Options_WithBadValues_ThrowAtTheSetter()
    {
        var options = new SpindleTransportOptions();

        Assert.Throws<ArgumentOutOfRangeException>(() => options.MaxReadBufferSize = 0);
        Assert.Throws<ArgumentOutOfRangeException>(() => options.MaxWriteBufferSize = -1);
        Assert.Throws<ArgumentOutOfRangeException>(() => options.Backlog = 0);
        Assert.Throws<ArgumentException>(() => options.PoolName = " ");
        options.MaxReadBufferSize = null;
        options.MaxWriteBufferSize = null;
        Assert.Null(options.MaxReadBufferSize);
        Assert.Null(options.MaxWriteBufferSize);
    }

    [Fact]
    public void ConnectionIds_AreThirteenBase32Characters()
    {
        Assert.Equal("0000000000001", ConnectionIds.Format(1));
        Assert.Equal("000000000000V", ConnectionIds.Format(31));
        Assert.Equal("0000000000010", ConnectionIds.Format(32));
        Assert.NotEqual(ConnectionIds.Next(), ConnectionIds.Next());
    }
}
