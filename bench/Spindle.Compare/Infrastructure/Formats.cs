using System.Globalization;

namespace Spindle.Compare.Infrastructure;

internal static class Formats
{
    /// <summary>Every figure the program prints uses the invariant culture.</summary>
    public static CultureInfo Culture => CultureInfo.InvariantCulture;
}
