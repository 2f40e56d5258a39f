using System;
using System.Diagnostics;

namespace Spindle.Telemetry;

/// <summary>
/// Writes a failure that the pool survives (a user's handler that threw, a fault in the pool's own timer code) to
/// <see cref="Trace"/>. It runs on threads where an escaping exception would end the process, so it never throws: the
/// exception's text calls the user's <see cref="Exception.ToString"/>, and a trace listener may throw too.
/// </summary>
internal static class FailureTrace
{
    /// <summary>Writes "Spindle: <paramref name="what"/>: " followed by <paramref name="exception"/>.</summary>
    public static void Write(string what, Exception exception)
    {
        try
        {
            string text;
            try
            {
                text = exception.ToString();
            }
            catch (Exception)
            {
                text = exception.GetType().FullName ?? exception.GetType().Name;
            }
            Trace.TraceError($"Spindle: {what}: {text}");
        }
        catch (Exception)
        {
            // A trace listener that throws must not end the process either: the failure is dropped.
        }
    }
}
