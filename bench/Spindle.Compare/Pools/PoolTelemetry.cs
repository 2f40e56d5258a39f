using System.Collections.Generic;
using System.Diagnostics.Tracing;

namespace Spindle.Compare.Pools;

/// <summary>
/// What a monitoring agent collects from a pool (<see cref="IPoolUnderTest.Telemetry"/>): every instrument of the meters
/// named <paramref name="MeterName"/>, and the events of <paramref name="EventSources"/>.
/// </summary>
internal sealed record PoolTelemetry(string MeterName, IReadOnlyList<EventSourceSelection> EventSources);

/// <summary>An event source to enable, by name, with the keywords and level an operator tracing the pool would use.</summary>
internal sealed record EventSourceSelection(string Name, EventKeywords Keywords, EventLevel Level);
