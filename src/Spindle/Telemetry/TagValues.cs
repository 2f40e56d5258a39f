using System.Text;

namespace Spindle.Telemetry;

/// <summary>
/// Attribute values for the meter's instruments, in the semantic conventions' spelling: lowercase snake_case
/// (<c>blocking_region</c>, not <c>BlockingRegion</c>). Computed once per value, never per measurement.
/// </summary>
internal static class TagValues
{
    private static readonly string[] s_priorities = [SnakeCase(nameof(LanePriority.Low)), SnakeCase(nameof(LanePriority.Normal)), SnakeCase(nameof(LanePriority.High))];

    /// <summary>A lane priority's attribute value (<c>low</c>, <c>normal</c>, <c>high</c>).</summary>
    public static string Priority(LanePriority priority) =>
        (uint)priority < (uint)s_priorities.Length ? s_priorities[(int)priority] : SnakeCase(priority.ToString());

    /// <summary>A PascalCase name in snake_case: a lowercase letter starts each word after the first, after an underscore.</summary>
    public static string SnakeCase(string pascalCase)
    {
        var text = new StringBuilder(pascalCase.Length + 4);
        for (int i = 0; i < pascalCase.Length; i++)
        {
            char c = pascalCase[i];
            if (char.IsUpper(c))
            {
                if (i > 0 && !char.IsUpper(pascalCase[i - 1]))
                {
                    text.Append('_');
                }
                text.Append(char.ToLowerInvariant(c));
            }
            else
            {
                text.Append(c);
            }
        }
        return text.ToString();
    }
}
