using System;
using System.Text;
using Spindle.Compare.Infrastructure;
using Xunit;

namespace Spindle.Compare.Tests;

/// <summary>The report's hypervisor steal figure (HostSteal): parsing /proc/stat's machine line and the share between two readings.</summary>
public sealed class HostStealTests
{
    [Fact]
    public void Parse_sums_the_first_eight_columns_and_takes_steal_from_the_eighth()
    {
        HostSteal? steal = HostSteal.Parse("cpu  1738772 0 114389 1065420 1262 0 23198 17239 0 0");

        Assert.Equal(new HostSteal(1738772 + 114389 + 1065420 + 1262 + 23198 + 17239, 17239), steal);
    }

    [Theory]
    [InlineData(null)]
    [InlineData("")]
    [InlineData("cpu0 1 2 3 4 5 6 7 8 0 0")]
    [InlineData("cpu  1 2 3 4 5 6 7")]
    [InlineData("cpu  1 2 3 x 5 6 7 8")]
    [InlineData("intr 1 2 3 4 5 6 7 8")]
    public void Parse_refuses_what_is_not_the_machine_line_with_a_steal_column(string? line) =>
        Assert.Null(HostSteal.Parse(line));

    [Fact]
    public void Parse_of_the_files_bytes_reads_the_first_line_only()
    {
        byte[] text = Encoding.ASCII.GetBytes("cpu  1738772 0 114389 1065420 1262 0 23198 17239 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 9\n");

        Assert.Equal(new HostSteal(1738772 + 114389 + 1065420 + 1262 + 23198 + 17239, 17239), HostSteal.Parse(text));
    }

    [Theory]
    [InlineData("")]
    [InlineData("cpu0 1 2 3 4 5 6 7 8 0 0\n")]
    [InlineData("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7 8\n")]
    [InlineData("cpu  1 2 3 -4 5 6 7 8\n")]
    [InlineData("cpu  1 2 3 +4 5 6 7 8\n")]
    [InlineData("cpu  1 2 3 4x 5 6 7 8\n")]
    public void Parse_of_the_files_bytes_refuses_what_the_line_parse_refuses(string text) =>
        Assert.Null(HostSteal.Parse(Encoding.ASCII.GetBytes(text)));

    [Fact]
    public void Reader_reads_this_machine_again_and_again_where_there_is_a_proc_stat()
    {
        var reader = new HostSteal.Reader();
        HostSteal? first = reader.Take();
        HostSteal? second = reader.Take();

        if (OperatingSystem.IsLinux())
        {
            Assert.NotNull(first);
            Assert.NotNull(second);
            Assert.True(second.Value.Total >= first.Value.Total, $"The machine's time went back: {first} then {second}.");
            Assert.True(second.Value.Steal >= first.Value.Steal, $"The steal went back: {first} then {second}.");
        }
        else
        {
            Assert.Null(first);
            Assert.Null(second);
        }
    }

    [Fact]
    public void Share_is_the_stolen_part_of_the_time_between_two_readings()
    {
        double? share = HostSteal.Share(new HostSteal(1_000, 10), new HostSteal(3_000, 70));

        Assert.NotNull(share);
        Assert.Equal(0.03, share.Value, precision: 10);
        Assert.Equal("3.0 % of the machine's CPU time during the runs (/proc/stat)", HostSteal.Text(share));
    }

    [Fact]
    public void Share_is_unknown_without_two_readings_or_time_between_them()
    {
        Assert.Null(HostSteal.Share(null, new HostSteal(3_000, 70)));
        Assert.Null(HostSteal.Share(new HostSteal(1_000, 10), null));
        Assert.Null(HostSteal.Share(new HostSteal(1_000, 10), new HostSteal(1_000, 10)));
        Assert.Equal("not available", HostSteal.Text(null));
    }

    [Fact]
    public void Take_reads_this_machine_where_there_is_a_proc_stat()
    {
        HostSteal? now = HostSteal.Take();

        if (OperatingSystem.IsLinux())
        {
            Assert.NotNull(now);
            Assert.True(now.Value.Total > 0);
            Assert.InRange(now.Value.Steal, 0, now.Value.Total);
        }
        else
        {
            Assert.Null(now);
        }
    }
}
