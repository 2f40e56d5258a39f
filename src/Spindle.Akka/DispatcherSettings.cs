using System;
using Akka.Configuration;

namespace Spindle.Akka;

/// <summary>A dispatcher's <c>spindle</c> section, validated (see <see cref="SpindleExecutorServiceConfigurator"/>).</summary>
internal sealed record DispatcherSettings(string Pool, int MinThreads, int MaxThreads, bool PreferLocal, LaneSettings? Lane)
{
    public const string DefaultPool = "akka";

    public static DispatcherSettings Parse(Config dispatcher)
    {
        ArgumentNullException.ThrowIfNull(dispatcher);
        Config section = Section(dispatcher, "spindle", "spindle");
        string pool = Read(section, "pool", static (c, p) => c.GetString(p, DefaultPool)) ?? DefaultPool;
        if (string.IsNullOrWhiteSpace(pool))
        {
            throw Invalid("pool", "must name a pool");
        }
        int min = ReadCount(section, "min-threads", WorkerPoolOptions.MaxThreadLimit);
        int max = ReadCount(section, "max-threads", WorkerPoolOptions.MaxThreadLimit);
        if (max != 0 && min > max)
        {
            throw Invalid("min-threads", $"is {min}, above max-threads ({max})");
        }
        bool preferLocal = Read(section, "prefer-local", static (c, p) => c.GetBoolean(p, true));
        LaneSettings? lane = null;
        if (section.HasPath("lane"))
        {
            Config laneSection = Section(section, "lane", "spindle.lane");
            string priorityText = Read(laneSection, "priority", static (c, p) => c.GetString(p, "normal")) ?? "normal";
            if (!Enum.TryParse(priorityText, ignoreCase: true, out LanePriority priority) || !Enum.IsDefined(priority)
                || int.TryParse(priorityText, out _))
            {
                throw Invalid("lane.priority", $"is '{priorityText}'; expected high, normal or low");
            }
            int share = Read(laneSection, "share", static (c, p) => c.GetInt(p, 1));
            if (share < 1 || share > LaneOptions.MaxShare)
            {
                throw Invalid("lane.share", $"is {share}; expected 1 to {LaneOptions.MaxShare}");
            }
            int cap = ReadCount(laneSection, "max-concurrency", int.MaxValue, "lane.");
            lane = new LaneSettings(priority, share, cap == 0 ? null : cap);
        }
        return new DispatcherSettings(pool, min, max, preferLocal, lane);
    }

    /// <summary>The object at <paramref name="path"/> (empty when absent); anything else there is a configuration error.</summary>
    private static Config Section(Config parent, string path, string fullPath)
    {
        if (!parent.HasPath(path))
        {
            return Config.Empty;
        }
        try
        {
            if (parent.GetValue(path) is { } value && !value.IsObject())
            {
                throw new ConfigurationException($"The dispatcher setting '{fullPath}' must be an object ({{ ... }}), not '{value}'.");
            }
            return parent.GetConfig(path) ?? Config.Empty;
        }
        catch (Exception e) when (e is FormatException or InvalidCastException or InvalidOperationException)
        {
            throw new ConfigurationException($"The dispatcher setting '{fullPath}' could not be read: {e.Message}", e);
        }
    }

    private static int ReadCount(Config section, string path, int limit, string prefix = "")
    {
        int value = Read(section, path, static (c, p) => c.GetInt(p, 0));
        if (value < 0 || value > limit)
        {
            throw Invalid(prefix + path, $"is {value}; expected 0 (the default) to {limit}");
        }
        return value;
    }

    private static T Read<T>(Config section, string path, Func<Config, string, T> read)
    {
        try
        {
            return read(section, path);
        }
        catch (Exception e) when (e is FormatException or OverflowException or ConfigurationException or InvalidCastException)
        {
            throw new ConfigurationException($"The dispatcher setting 'spindle.{path}' could not be read: {e.Message}", e);
        }
    }

    private static ConfigurationException Invalid(string path, string problem) =>
        new($"The dispatcher setting 'spindle.{path}' {problem}.");
}

/// <summary>A dispatcher's own lane: its priority class, share and cap.</summary>
internal sealed record LaneSettings(LanePriority Priority, int Share, int? MaxConcurrency);
