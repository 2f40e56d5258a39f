using System;
using System.Globalization;
using System.Reflection;
using System.Text;
using System.Threading.Tasks;
using Spindle.Lanes;
using Spindle.Queues;
using Spindle.Scheduling;

namespace Spindle.Telemetry;

/// <summary>
/// Names a running item for diagnostics, from its entry's callback and, for the library's items whose callback is shared
/// by many items, the item itself (its owner: the entry's state, which such items publish while they run): a delegate
/// by its method's declaring type and name, a work item by its type, a task of the pool's scheduler by its id and type
/// (its delegate is not public), and a library wrapper by what it wraps. Called only when something is reported, never
/// per item.
/// </summary>
/// <remarks>
/// The callback and owner come from another thread without synchronization (see <see cref="Worker"/>): every step tests
/// types and matches the owner to the callback (as <see cref="WorkItemEntry.FindShutdownOwner"/> does) rather than
/// assuming a shape from the other value.
/// </remarks>
internal static class ItemDescriber
{
    /// <summary>The item's name, prefixed by its lane's (<c>lane 'x': …</c>) when it came from a lane.</summary>
    public static string Describe(object callback, object? owner, Lane? lane)
    {
        string item = DescribeItem(callback, owner);
        return lane is null ? item : $"lane '{lane.Options.Name}': {item}";
    }

    /// <summary>
    /// Whether the item is a lane's long-running item (<see cref="LongRunningLaneItem"/>), possibly inside another
    /// entry wrapper: such items are long on purpose and not watched.
    /// </summary>
    public static bool IsLongRunning(object callback)
    {
        while (callback is IEntryWrapper wrapper)
        {
            if (wrapper is LongRunningLaneItem)
            {
                return true;
            }
            if (wrapper.WrappedEntry.Callback is not object inner)
            {
                break;
            }
            callback = inner;
        }
        return false;
    }

    /// <summary>
    /// The item's name (see the class remarks). <paramref name="state"/> is the entry's state, or the owner the item
    /// published, or null when neither is known.
    /// </summary>
    public static string DescribeItem(object callback, object? state)
    {
        // The library's wrappers of a whole entry are named by the entry they run.
        while (callback is IEntryWrapper entryWrapper && entryWrapper.WrappedEntry.Callback is object wrappedCallback)
        {
            callback = wrappedCallback;
            state = entryWrapper.WrappedEntry.State;
        }
        object subject = callback;
        if (!ReferenceEquals(state, WorkItemEntry.WorkItemMarker) && callback is Delegate queued)
        {
            // A library delegate queued with its owner as the state (Run items, timers, waits) or as its target (posts,
            // the task scheduler): the same test as WorkItemEntry.FindShutdownOwner, made with type tests.
            IShutdownAware? owner = state is IShutdownAware byState && ReferenceEquals(byState.QueuedCallback, queued)
                ? byState
                : queued.Target is IShutdownAware byTarget && ReferenceEquals(byTarget.QueuedCallback, queued) ? byTarget : null;
            if (owner is TaskScheduler) // the pool's task scheduler, the one scheduler whose entries say so
            {
                return state is Task task ? DescribeTask(task) : "Task";
            }
            subject = owner ?? subject;
        }
        if (subject is ICallbackWrapper wrapper && wrapper.WrappedCallback is object wrapped)
        {
            subject = wrapped;
        }
        return subject is Delegate callbackDelegate ? DescribeDelegate(callbackDelegate) : TypeName(subject.GetType());
    }

    /// <summary><c>Namespace.Type.Method</c>, or the delegate's type when the method cannot be had.</summary>
    private static string DescribeDelegate(Delegate callback)
    {
        try
        {
            // NativeAOT keeps no metadata for methods that nothing reflects on: Method may then throw or name a stub.
            MethodInfo method = callback.Method;
            if (method.DeclaringType is Type declaringType)
            {
                return TypeName(declaringType) + "." + method.Name;
            }
        }
        catch (Exception)
        {
        }
        return TypeName(callback.GetType());
    }

    /// <summary><c>Task 42</c>, with the task's type when it is not a plain task (an async method's box names the method).</summary>
    private static string DescribeTask(Task task)
    {
        Type type = task.GetType();
        bool plain = type == typeof(Task) || (type.IsGenericType && type.GetGenericTypeDefinition() == typeof(Task<>));
        return plain
            ? string.Create(CultureInfo.InvariantCulture, $"Task {task.Id}")
            : string.Create(CultureInfo.InvariantCulture, $"Task {task.Id} ({TypeName(type)})");
    }

    /// <summary>A type's full name, generic arguments written as <c>&lt;A, B&gt;</c> rather than assembly-qualified.</summary>
    internal static string TypeName(Type type)
    {
        if (!type.IsGenericType || type.IsGenericTypeDefinition)
        {
            return type.FullName ?? type.Name;
        }
        string definition = type.GetGenericTypeDefinition().FullName ?? type.Name;
        var name = new StringBuilder(definition.Length + 32);
        for (int i = 0; i < definition.Length; i++)
        {
            if (definition[i] == '`')
            {
                while (i + 1 < definition.Length && char.IsAsciiDigit(definition[i + 1]))
                {
                    i++;
                }
                continue;
            }
            name.Append(definition[i]);
        }
        name.Append('<');
        Type[] arguments = type.GetGenericArguments();
        for (int i = 0; i < arguments.Length; i++)
        {
            name.Append(i == 0 ? "" : ", ").Append(TypeName(arguments[i]));
        }
        return name.Append('>').ToString();
    }
}
