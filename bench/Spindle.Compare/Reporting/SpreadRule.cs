namespace Spindle.Compare.Reporting;

/// <summary>
/// When one pool's runs of a row spread wider than another's: the first spread (max / min of its runs) is above
/// <see cref="WideSpread"/> and above <see cref="WiderThanOther"/> times the second. <see cref="ReportRow.SpreadWider"/>
/// asks it of Spindle against the built-in pool; <see cref="ReportRow.BaselineSpreadWider"/> asks the same of the
/// built-in pool against Spindle.
/// </summary>
internal static class SpreadRule
{
    /// <summary>A spread above this factor can be flagged…</summary>
    public const double WideSpread = 1.5;

    /// <summary>…when it is also more than this many times the other pool's spread.</summary>
    public const double WiderThanOther = 1.25;

    /// <summary>Whether <paramref name="spread"/> is wider than <paramref name="other"/> by the rule; false when either is unknown.</summary>
    public static bool Wider(double? spread, double? other) =>
        spread is { } s && other is { } o && s > WideSpread && s > WiderThanOther * o;
}
