using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using Microsoft.Extensions.Logging;

namespace Spindle.Extensions.Hosting.Tests;

/// <summary>One captured log call: its category, level, event, formatted message, exception and structured values.</summary>
internal sealed record LogEntry(
    string Category, LogLevel Level, EventId EventId, string Message, Exception? Exception,
    IReadOnlyDictionary<string, object?> Values);

/// <summary>An <see cref="ILoggerProvider"/> that keeps every log call of every level in memory.</summary>
internal sealed class CapturingLoggerProvider : ILoggerProvider
{
    private readonly ConcurrentQueue<LogEntry> _entries = new();

    public IReadOnlyList<LogEntry> Entries => _entries.ToArray();

    public IReadOnlyList<LogEntry> WithEvent(string eventName) => Entries.Where(e => e.EventId.Name == eventName).ToArray();

    /// <summary>Waits (generously) until an entry with <paramref name="eventName"/> has been logged, and returns it.</summary>
    public LogEntry WaitForEvent(string eventName, TimeSpan timeout)
    {
        DateTime deadline = DateTime.UtcNow + timeout;
        while (true)
        {
            IReadOnlyList<LogEntry> found = WithEvent(eventName);
            if (found.Count > 0)
            {
                return found[0];
            }
            if (DateTime.UtcNow > deadline)
            {
                throw new TimeoutException($"No '{eventName}' log entry within {timeout}; logged: " +
                    string.Join(" | ", Entries.Select(e => $"{e.EventId.Name}: {e.Message}")));
            }
            Thread.Sleep(10);
        }
    }

    public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

    public void Dispose()
    {
    }

    private sealed class Logger(CapturingLoggerProvider owner, string category) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            var values = new Dictionary<string, object?>();
            if (state is IEnumerable<KeyValuePair<string, object?>> pairs)
            {
                foreach (KeyValuePair<string, object?> pair in pairs)
                {
                    values[pair.Key] = pair.Value;
                }
            }
            owner._entries.Enqueue(new LogEntry(category, logLevel, eventId, formatter(state, exception), exception, values));
        }
    }
}
