using System;
using System.Threading;
using Xunit;

namespace Spindle.Tests;

/// <summary>A background thread whose exception, if any, is rethrown by <see cref="Join"/>.</summary>
internal sealed class TestThread
{
    private readonly Thread _thread;
    private readonly string _name;
    private Exception? _failure;

    public TestThread(Action body, string name)
    {
        _name = name;
        _thread = new Thread(() =>
        {
            try
            {
                body();
            }
            catch (Exception e)
            {
                _failure = e;
            }
        })
        {
            IsBackground = true,
            Name = name,
        };
        _thread.Start();
    }

    /// <summary>Waits with the must-happen bound and rethrows what the body threw.</summary>
    public void Join()
    {
        Assert.True(_thread.Join(Waits.MustHappen), $"Thread '{_name}' did not finish within {Waits.MustHappen.TotalSeconds} s.");
        if (_failure is not null)
        {
            throw new InvalidOperationException($"Thread '{_name}' failed: {_failure.GetType().Name}: {_failure.Message}", _failure);
        }
    }
}
