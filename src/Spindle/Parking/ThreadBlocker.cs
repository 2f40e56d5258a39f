using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using Spindle.Primitives;

namespace Spindle.Parking;

/// <summary>Which OS primitive a <see cref="ThreadBlocker"/> sleeps on.</summary>
internal enum BlockerKind
{
    /// <summary>Linux <c>futex</c> (private wait/wake) through the libc <c>syscall</c> entry point.</summary>
    LinuxFutex,

    /// <summary>Windows <c>WaitOnAddress</c> / <c>WakeByAddressSingle</c>.</summary>
    WindowsWaitOnAddress,

    /// <summary>A <see cref="Monitor"/> wait, for every other platform (and for tests that force it).</summary>
    Monitor,
}

/// <summary>
/// A one-permit parking spot for one thread (like Java's <c>LockSupport.park/unpark</c>): <see cref="Wait(int)"/> blocks
/// until <see cref="Signal"/> has been called at least once since the last successful wait, and consumes that signal.
/// A signal sent before the wait is not lost.
/// </summary>
/// <remarks>
/// <para>State word (<c>_word</c>, in pinned memory so the kernel can key on its address): 0 = empty, 1 = signalled,
/// 2 = a waiter is (about to be) asleep. Only the owning thread waits, so at most one thread ever sleeps on the word.</para>
/// <list type="bullet">
/// <item>Wait: CAS 1→0 consumes a signal and returns. Otherwise CAS 0→2 announces the sleeper, then sleep while the word
/// is still 2 (the kernel checks the value atomically with queueing the sleeper, so a Signal between the CAS and the
/// sleep makes the sleep return at once).</item>
/// <item>Signal: exchange the word with 1; only if it was 2 is there a sleeper to wake, so a signal to a running thread
/// costs one atomic and no system call.</item>
/// <item>A timed wait that times out CASes 2→0; if that fails a signal arrived, which it consumes, and reports success.</item>
/// </list>
/// </remarks>
internal abstract partial class ThreadBlocker
{
    private const int Empty = 0;
    private const int Signalled = 1;
    private const int Sleeping = 2;

    private static readonly BlockerKind s_platformKind = DetectPlatformKind();

    /// <summary>The primitive this platform uses when nothing forces the fallback.</summary>
    public static BlockerKind PlatformKind => s_platformKind;

    public abstract BlockerKind Kind { get; }

    public static ThreadBlocker Create() => Create(s_platformKind);

    /// <summary>Adds the rare paths of the blockers, the private ones included, to <paramref name="methods"/> (see <see cref="RarePath.AddMarked"/>).</summary>
    public static void AddRarePaths(List<PreparedMethod> methods)
    {
        RarePath.AddMarked(typeof(ThreadBlocker), methods);
        RarePath.AddMarked(typeof(AddressBlocker), methods);
        RarePath.AddMarked(typeof(FutexBlocker), methods);
    }

    [MethodImpl(RarePath.Compile)]
    public static ThreadBlocker Create(BlockerKind kind) => kind switch
    {
        BlockerKind.LinuxFutex => new FutexBlocker(),
        BlockerKind.WindowsWaitOnAddress => new WaitOnAddressBlocker(),
        BlockerKind.Monitor => new MonitorBlocker(),
        _ => throw new ArgumentOutOfRangeException(nameof(kind)),
    };

    /// <summary>Blocks until signalled. Returns false if <paramref name="timeoutMs"/> (or -1 for infinite) passes first.</summary>
    public abstract bool Wait(int timeoutMs = Timeout.Infinite);

    /// <summary>Wakes the owner if it sleeps, or lets its next <see cref="Wait(int)"/> return at once.</summary>
    public abstract void Signal();

    /// <summary>
    /// Blocks until signalled or until <see cref="Stopwatch.GetTimestamp"/> reaches <paramref name="deadline"/>; returns
    /// false on the deadline. Never returns false early. The futex blocker sleeps to the nanosecond; the others round
    /// the remaining time up to whole milliseconds.
    /// </summary>
    public virtual bool WaitUntil(long deadline)
    {
        while (true)
        {
            long left = deadline - Stopwatch.GetTimestamp();
            if (left <= 0)
            {
                return Wait(0);
            }
            if (Wait(TicksToWholeMilliseconds(left)))
            {
                return true;
            }
        }
    }

    private protected static int TicksToWholeMilliseconds(long ticks)
    {
        long ms = (ticks * 1000 + Stopwatch.Frequency - 1) / Stopwatch.Frequency;
        return (int)Math.Min(ms, int.MaxValue - 1);
    }

    private static BlockerKind DetectPlatformKind()
    {
        if (OperatingSystem.IsLinux() && FutexBlocker.IsSupported())
        {
            return BlockerKind.LinuxFutex;
        }
        if (OperatingSystem.IsWindowsVersionAtLeast(6, 2) && WaitOnAddressBlocker.IsSupported())
        {
            return BlockerKind.WindowsWaitOnAddress;
        }
        return BlockerKind.Monitor;
    }

    /// <summary>Shared logic of the address-based blockers; the subclass supplies the sleep and wake calls.</summary>
    private abstract unsafe partial class AddressBlocker : ThreadBlocker
    {
        // A pinned array gives the word a stable address for the kernel while leaving its lifetime to the GC.
        private readonly int[] _storage = GC.AllocateArray<int>(16, pinned: true);

        protected int* Word => (int*)Unsafe.AsPointer(ref _storage[0]);

        public sealed override bool Wait(int timeoutMs = Timeout.Infinite)
        {
            ref int word = ref _storage[0];
            if (Interlocked.CompareExchange(ref word, Empty, Signalled) == Signalled)
            {
                return true;
            }
            int previous = Interlocked.CompareExchange(ref word, Sleeping, Empty);
            if (previous == Signalled)
            {
                Volatile.Write(ref word, Empty);
                return true;
            }
            Debug.Assert(previous == Empty, "Only the owner waits, so nobody else can have set Sleeping.");

            long deadline = timeoutMs == Timeout.Infinite ? long.MaxValue : Environment.TickCount64 + timeoutMs;
            while (Volatile.Read(ref word) == Sleeping)
            {
                int remaining = Timeout.Infinite;
                if (deadline != long.MaxValue)
                {
                    long left = deadline - Environment.TickCount64;
                    if (left <= 0)
                    {
                        if (Interlocked.CompareExchange(ref word, Empty, Sleeping) == Sleeping)
                        {
                            return false;
                        }
                        break; // a signal raced the timeout: take it
                    }
                    remaining = (int)left;
                }
                SleepWhileSleeping(remaining);
            }
            Debug.Assert(Volatile.Read(ref word) == Signalled, "Only Signal moves the word out of Sleeping here.");
            Volatile.Write(ref word, Empty);
            return true;
        }

        [MethodImpl(RarePath.Compile)]
        public sealed override bool WaitUntil(long deadline)
        {
            ref int word = ref _storage[0];
            if (Interlocked.CompareExchange(ref word, Empty, Signalled) == Signalled)
            {
                return true;
            }
            int previous = Interlocked.CompareExchange(ref word, Sleeping, Empty);
            if (previous == Signalled)
            {
                Volatile.Write(ref word, Empty);
                return true;
            }
            Debug.Assert(previous == Empty, "Only the owner waits, so nobody else can have set Sleeping.");
            while (Volatile.Read(ref word) == Sleeping)
            {
                long left = deadline - Stopwatch.GetTimestamp();
                if (left <= 0)
                {
                    if (Interlocked.CompareExchange(ref word, Empty, Sleeping) == Sleeping)
                    {
                        return false;
                    }
                    break; // a signal raced the deadline: take it
                }
                SleepWhileSleepingTicks(left);
            }
            Debug.Assert(Volatile.Read(ref word) == Signalled, "Only Signal moves the word out of Sleeping here.");
            Volatile.Write(ref word, Empty);
            return true;
        }

        /// <summary>Sleeps while <c>*Word == Sleeping</c> for at most <paramref name="ticks"/> Stopwatch ticks (rounded up).</summary>
        protected virtual void SleepWhileSleepingTicks(long ticks) => SleepWhileSleeping(TicksToWholeMilliseconds(ticks));

        public sealed override void Signal()
        {
            if (Interlocked.Exchange(ref _storage[0], Signalled) == Sleeping)
            {
                WakeOne();
            }
        }

        /// <summary>Sleeps while <c>*Word == Sleeping</c>; may return early or spuriously.</summary>
        protected abstract void SleepWhileSleeping(int timeoutMs);

        protected abstract void WakeOne();
    }

    private sealed unsafe partial class FutexBlocker : AddressBlocker
    {
        private const int FutexWaitPrivate = 0 | 128;
        private const int FutexWakePrivate = 1 | 128;
        private static readonly long s_futexSyscall = RuntimeInformation.ProcessArchitecture switch
        {
            Architecture.X64 => 202,
            Architecture.Arm64 => 98,
            Architecture.X86 or Architecture.Arm => 240,
            Architecture.RiscV64 or Architecture.LoongArch64 => 98,
            _ => -1,
        };

        public override BlockerKind Kind => BlockerKind.LinuxFutex;

        [StructLayout(LayoutKind.Sequential)]
        private struct TimeSpec
        {
            public nint Seconds;
            public nint Nanoseconds;
        }

        [LibraryImport("libc", EntryPoint = "syscall", SetLastError = true)]
        private static partial nint Syscall(nint number, int* address, int operation, int value, TimeSpec* timeout, nint address2, int value3);

        public static bool IsSupported()
        {
            if (s_futexSyscall < 0)
            {
                return false;
            }
            try
            {
                // Waking a word nobody sleeps on is harmless and proves the call path works.
                int probe = 0;
                return Syscall((nint)s_futexSyscall, &probe, FutexWakePrivate, 1, null, 0, 0) >= 0;
            }
            catch (Exception e) when (e is DllNotFoundException or EntryPointNotFoundException)
            {
                return false;
            }
        }

        protected override void SleepWhileSleeping(int timeoutMs)
        {
            if (timeoutMs == Timeout.Infinite)
            {
                Syscall((nint)s_futexSyscall, Word, FutexWaitPrivate, Sleeping, null, 0, 0);
                return;
            }
            var timeout = new TimeSpec { Seconds = timeoutMs / 1000, Nanoseconds = timeoutMs % 1000 * 1_000_000 };
            Syscall((nint)s_futexSyscall, Word, FutexWaitPrivate, Sleeping, &timeout, 0, 0);
        }

        [MethodImpl(RarePath.Compile)]
        protected override void SleepWhileSleepingTicks(long ticks)
        {
            long ns = (long)((double)ticks * 1_000_000_000 / Stopwatch.Frequency) + 1;
            var timeout = new TimeSpec { Seconds = (nint)(ns / 1_000_000_000), Nanoseconds = (nint)(ns % 1_000_000_000) };
            Syscall((nint)s_futexSyscall, Word, FutexWaitPrivate, Sleeping, &timeout, 0, 0);
        }

        protected override void WakeOne() => Syscall((nint)s_futexSyscall, Word, FutexWakePrivate, 1, null, 0, 0);
    }

    private sealed unsafe partial class WaitOnAddressBlocker : AddressBlocker
    {
        private const string SynchLibrary = "api-ms-win-core-synch-l1-2-0.dll";

        public override BlockerKind Kind => BlockerKind.WindowsWaitOnAddress;

        [LibraryImport(SynchLibrary, EntryPoint = "WaitOnAddress")]
        [return: MarshalAs(UnmanagedType.Bool)]
        private static partial bool WaitOnAddressNative(void* address, void* compareAddress, nint addressSize, uint milliseconds);

        [LibraryImport(SynchLibrary, EntryPoint = "WakeByAddressSingle")]
        private static partial void WakeByAddressSingleNative(void* address);

        public static bool IsSupported() => NativeLibrary.TryLoad(SynchLibrary, out _);

        protected override void SleepWhileSleeping(int timeoutMs)
        {
            int compare = Sleeping;
            WaitOnAddressNative(Word, &compare, sizeof(int), unchecked((uint)timeoutMs));
        }

        protected override void WakeOne() => WakeByAddressSingleNative(Word);
    }

    private sealed class MonitorBlocker : ThreadBlocker
    {
        private readonly object _gate = new();
        private bool _signalled;

        public override BlockerKind Kind => BlockerKind.Monitor;

        public override bool Wait(int timeoutMs = Timeout.Infinite)
        {
            lock (_gate)
            {
                long deadline = timeoutMs == Timeout.Infinite ? long.MaxValue : Environment.TickCount64 + timeoutMs;
                while (!_signalled)
                {
                    int remaining = Timeout.Infinite;
                    if (deadline != long.MaxValue)
                    {
                        long left = deadline - Environment.TickCount64;
                        if (left <= 0)
                        {
                            return false;
                        }
                        remaining = (int)left;
                    }
                    System.Threading.Monitor.Wait(_gate, remaining);
                }
                _signalled = false;
                return true;
            }
        }

        public override void Signal()
        {
            lock (_gate)
            {
                _signalled = true;
                System.Threading.Monitor.Pulse(_gate);
            }
        }
    }
}
