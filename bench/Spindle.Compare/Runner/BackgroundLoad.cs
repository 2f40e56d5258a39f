using System;
using System.Collections.Generic;
using System.ComponentModel;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;

namespace Spindle.Compare.Runner;

/// <summary>
/// CPU-burning processes beside every child run (<c>--background-load N</c>): N copies of this program started with
/// <see cref="ChildProtocol.BurnSwitch"/>, each spinning one thread in a tight loop for the whole comparison, so that
/// the pools are measured on a machine where other work competes for the cores. On Linux each burner first starts a
/// session of its own (<c>setsid</c>), so that it competes as another service does, not as a thread of the comparison's
/// own scheduling group.
/// </summary>
/// <remarks>
/// A burner's stdin is a pipe the parent holds open and never writes to; a thread of the burner reads it and ends the
/// spinning at its end of file, which comes when the parent closes it or dies, however it dies (the pipe is not
/// inherited by the children or by the other burners: .NET opens it close-on-exec). So a burner cannot outlive the
/// comparison even when the parent is killed outright. The parent also kills them itself: when it disposes this (the
/// comparison's finally block), on Ctrl+C (<see cref="Console.CancelKeyPress"/>) and when the runtime shuts the process
/// down (<see cref="AppDomain.ProcessExit"/>, on SIGTERM for instance).
/// <para>Why a session of its own: where the kernel's fair scheduler groups tasks by session (autogroup, on by default in
/// Debian's and most distributions' kernels when the processes sit in the root CPU cgroup), burners in the parent's
/// session share one group with the child being measured, and the child's woken threads then compete with them thread
/// against thread. Another service on the machine, or a process in another container (a cgroup of its own), is a group
/// of its own instead: the child's group as a whole gets its share, and a thread woken when that share is spent waits
/// for a burner's slice to end (milliseconds). The two conditions rank the pools differently (measured on 2 cores,
/// `wake-latency` p99: Spindle 0.12 ms against the built-in pool's 3.7 ms in one group, 3.9 against 0.2-3.1 ms in
/// separate ones), and the second is the one a service meets.</para>
/// </remarks>
internal sealed partial class BackgroundLoad : IDisposable
{
    private static volatile bool s_stdinEnded;

    private readonly List<Process> _burners = [];
    private readonly ConsoleCancelEventHandler _onCancel;
    private readonly EventHandler _onExit;

    private BackgroundLoad()
    {
        _onCancel = (_, _) => Stop();
        _onExit = (_, _) => Stop();
    }

    /// <summary>The process ids of the burners started and not stopped yet.</summary>
    public IReadOnlyList<int> ProcessIds
    {
        get
        {
            lock (_burners)
            {
                return _burners.Select(b => b.Id).ToList();
            }
        }
    }

    /// <summary>How many burners have exited before being stopped (the load was then lighter than announced).</summary>
    public int Exited
    {
        get
        {
            lock (_burners)
            {
                return _burners.Count(b => b.HasExited);
            }
        }
    }

    /// <summary>
    /// Starts <paramref name="count"/> burners (none for 0), launched as <see cref="ChildProcess"/> launches a child.
    /// Throws <see cref="Win32Exception"/> or <see cref="InvalidOperationException"/> when one cannot start, after
    /// stopping those already started.
    /// </summary>
    public static BackgroundLoad Start(int count)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(count);
        var load = new BackgroundLoad();
        if (count == 0)
        {
            return load;
        }
        Console.CancelKeyPress += load._onCancel;
        AppDomain.CurrentDomain.ProcessExit += load._onExit;
        try
        {
            for (int i = 0; i < count; i++)
            {
                load.StartOne();
            }
        }
        catch
        {
            load.Dispose();
            throw;
        }
        return load;
    }

    private void StartOne()
    {
        ProcessStartInfo startInfo = ChildProcess.CreateStartInfo();
        startInfo.ArgumentList.Add(ChildProtocol.BurnSwitch);
        startInfo.RedirectStandardInput = true;
        // A burner writes nothing unless it fails, and then its message had better reach the console.
        startInfo.RedirectStandardOutput = false;
        startInfo.RedirectStandardError = false;
        var process = new Process { StartInfo = startInfo };
        try
        {
            process.Start();
        }
        catch
        {
            process.Dispose();
            throw;
        }
        lock (_burners)
        {
            _burners.Add(process);
        }
    }

    /// <summary>Kills the burners and waits for them to exit; the handlers of Ctrl+C and process exit go.</summary>
    public void Dispose()
    {
        Stop();
        Console.CancelKeyPress -= _onCancel;
        AppDomain.CurrentDomain.ProcessExit -= _onExit;
    }

    /// <summary>Kills every burner still listed; safe to call more than once and from the Ctrl+C thread.</summary>
    private void Stop()
    {
        lock (_burners)
        {
            foreach (Process burner in _burners)
            {
                try
                {
                    burner.Kill();
                }
                catch (Exception exception) when (exception is InvalidOperationException or Win32Exception)
                {
                    // It has exited already.
                }
                burner.WaitForExit(TimeSpan.FromSeconds(5));
                burner.Dispose(); // closes our end of its stdin too
            }
            _burners.Clear();
        }
    }

    /// <summary>
    /// The burner's side (<see cref="ChildProtocol.BurnSwitch"/>): spins the calling thread until stdin reaches its
    /// end, read by a background thread; returns the exit code.
    /// </summary>
    public static int Burn()
    {
        if (OperatingSystem.IsLinux() && SetSid() < 0)
        {
            // Not fatal: the load still runs, in the parent's scheduling group; say so, as the report will not.
            Console.Error.WriteLine($"background load: setsid failed (errno {Marshal.GetLastPInvokeError()}); this burner shares the comparison's session.");
        }
        var watcher = new Thread(WaitForStdinEnd) { IsBackground = true, Name = "stdin watcher" };
        watcher.Start();
        long spins = 0;
        while (!s_stdinEnded)
        {
            spins++; // the load: one core's worth of work that neither allocates nor sleeps
        }
        GC.KeepAlive(spins);
        return 0;
    }

    [LibraryImport("libc", EntryPoint = "setsid", SetLastError = true)]
    private static partial int SetSid();

    private static void WaitForStdinEnd()
    {
        try
        {
            using Stream input = Console.OpenStandardInput();
            byte[] buffer = new byte[256];
            while (input.Read(buffer) > 0)
            {
                // The parent writes nothing; whatever comes is ignored.
            }
        }
        catch (IOException)
        {
            // A broken stdin ends the load as its end does.
        }
        s_stdinEnded = true;
    }
}
