using System;
using System.Threading;

namespace Spindle.AspNetCore.Transport;

/// <summary>
/// Connection ids in the shape of Kestrel's own: 13 characters of base32 of a process-wide counter that starts from
/// the clock, so ids differ between runs and never repeat within one.
/// </summary>
internal static class ConnectionIds
{
    private const string Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUV";

    private static long s_last = DateTime.UtcNow.Ticks;

    public static string Next() => Format(Interlocked.Increment(ref s_last));

    internal static string Format(long id) => string.Create(13, id, static (span, value) =>
    {
        for (int i = span.Length - 1; i >= 0; i--)
        {
            span[i] = Alphabet[(int)(value & 31)];
            value >>= 5;
        }
    });
}
