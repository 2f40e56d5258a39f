using System;
using Spindle;

namespace OpenTelemetry.Metrics;

/// <summary>Adds Spindle's metrics to an OpenTelemetry <see cref="MeterProviderBuilder"/>.</summary>
/// <remarks>
/// <para>Every <see cref="WorkerPool"/> of the process publishes its instruments on a meter named <c>Spindle</c>,
/// each measurement tagged with the pool's name (<c>spindle.pool.name</c>): thread counts, threads added and retired,
/// queue lengths, lanes, item exceptions (<c>error.type</c>) and stuck items, and two histograms in seconds, the run
/// time of items and their wait in the queue.</para>
/// <para>The histograms advise bucket boundaries from 1 µs to 10 s. The OpenTelemetry SDK uses an instrument's advice
/// unless a view says otherwise; its own default boundaries (0, 5, 10 ... 10,000) suit milliseconds and would put
/// every item in the first bucket.</para>
/// </remarks>
public static class SpindleMeterProviderBuilderExtensions
{
    /// <summary>The name of the meter the pools publish on.</summary>
    public const string MeterName = "Spindle";

    /// <summary>Collects the <c>Spindle</c> meter: the instruments of every worker pool in the process.</summary>
    /// <param name="builder">The meter provider's builder.</param>
    /// <returns><paramref name="builder"/>, for chaining.</returns>
    /// <exception cref="ArgumentNullException"><paramref name="builder"/> is null.</exception>
    public static MeterProviderBuilder AddSpindleInstrumentation(this MeterProviderBuilder builder)
    {
        ArgumentNullException.ThrowIfNull(builder);
        return builder.AddMeter(MeterName);
    }
}
