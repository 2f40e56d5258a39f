namespace Spindle.Compare.Runner;

/// <summary>The hidden command line and output format between the parent and its child processes.</summary>
internal static class ChildProtocol
{
    /// <summary>First argument of a child: <c>--child &lt;scenario&gt; &lt;variant&gt; &lt;pool&gt; [--full]</c>.</summary>
    public const string ChildSwitch = "--child";

    public const string FullSwitch = "--full";

    /// <summary>
    /// Only argument of a background-load process (<c>--background-load</c>): it spins one thread until its stdin, which
    /// the parent holds open, reaches its end. See <see cref="BackgroundLoad"/>.
    /// </summary>
    public const string BurnSwitch = "--burn";

    /// <summary>Prefix of the single stdout line that carries the <see cref="ChildResult"/>.</summary>
    public const string ResultMarker = "##spindle-compare-result ";
}
