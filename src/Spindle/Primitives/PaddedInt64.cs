using System.Runtime.InteropServices;

namespace Spindle.Primitives;

/// <summary>
/// A 64-bit value alone on its cache line (128 bytes, so adjacent-line prefetchers do not pair it with a neighbour).
/// Hot fields written by different threads each get one, so a write by one thread never invalidates the line another
/// thread is reading.
/// </summary>
[StructLayout(LayoutKind.Explicit, Size = 2 * CacheLine.Size)]
internal struct PaddedInt64
{
    [FieldOffset(CacheLine.Size)]
    public long Value;
}

/// <summary>A 32-bit value alone on its cache line; see <see cref="PaddedInt64"/>.</summary>
[StructLayout(LayoutKind.Explicit, Size = 2 * CacheLine.Size)]
internal struct PaddedInt32
{
    [FieldOffset(CacheLine.Size)]
    public int Value;
}

/// <summary>
/// Two cache lines of nothing: a struct of sequential layout whose fields one thread writes often puts one before and
/// one after them, so that wherever the struct lands in its owner, the fields other threads read are on other lines.
/// </summary>
[StructLayout(LayoutKind.Explicit, Size = 2 * CacheLine.Size)]
internal struct CacheLinePad
{
}

internal static class CacheLine
{
    /// <summary>Conservative line size: 64 bytes on x64 and most Arm cores, 128 on Apple silicon.</summary>
    public const int Size = 64;
}

/// <summary>An object reference alone on its cache line; see <see cref="PaddedInt64"/>.</summary>
[StructLayout(LayoutKind.Explicit, Size = 2 * CacheLine.Size)]
internal struct PaddedReference
{
    [FieldOffset(CacheLine.Size)]
    public object? Value;
}

/// <summary>
/// An object of two cache lines of nothing, allocated right after an object whose thread touches it on every item (a
/// pool thread's <see cref="System.Threading.Thread"/>), so that whatever the allocating thread allocates next (the next
/// worker's parts) never shares a cache line with it. The collector's compaction slides live objects together in their
/// order, so the guard stays between them for as long as its holder keeps it alive.
/// </summary>
internal sealed class CacheLineGuard
{
#pragma warning disable CS0169 // never read: its size is its purpose
    private CacheLinePad _pad;
#pragma warning restore CS0169
}
