using System;
using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;
using System.Reflection;
using System.Runtime.CompilerServices;

namespace Spindle.Primitives;

/// <summary>
/// How the pool's rare paths are compiled: <c>[MethodImpl(RarePath.Compile)]</c> marks a method that the pool runs a few
/// times per burst, per idle spell or per monitor tick (a worker's look outside, the end of a peer watch, a timer
/// assist, the timer thread's search for the next slot, the stall monitor's tick and arming, a timed park), and the
/// path a thread takes once in its life (its start, its worker's construction and first steps, its retirement and exit,
/// the monitor's judgement that adds it).
/// </summary>
/// <remarks>
/// <para>Tiered compilation starts every method unoptimised and recompiles it once it has been called 30 times (twice
/// with dynamic PGO: an instrumented tier, then the final one). A method called a few times per burst reaches those
/// counts at an arbitrary later moment, in the middle of whatever the pool is then doing, and the background compiler
/// then holds a core for about a millisecond per method. In a process of two cores that is the core a worker needed:
/// a burst of timers measured after several warm-up rounds still compiled 10-20 of the pool's methods (the timer
/// wheel's slot search, the peer watch's end, the monitor's tick) while it ran, and the items queued meanwhile waited
/// behind the compiler for 1-3 ms. A burst of blocked work is the same on a larger scale: it starts a thread per item,
/// so the whole thread-start path crossed its thirtieth call in the middle of the first such burst, and 200 items of a
/// 100 ms sleep met some 330 compilations (about 150 ms of a core) while their threads were being started.</para>
/// <para>A method so marked is compiled once, fully optimised, at its first call (no unoptimised tier, no later
/// recompilation; it is also left out of ReadyToRun images), so the pool's behaviour does not change when such a path
/// has been taken for the thirtieth time. The methods the workers run per item are not marked: they reach their final
/// tier within the first milliseconds of work, with the profile dynamic PGO gathers for them.</para>
/// <para>Compiled at the first call is still compiled in the middle of something: the first stall of blocked work
/// compiled the monitor's judgement, its injection and the threads' start and retirement paths (16-22 ms of
/// compilation, a third of them on the monitor's own path to its first injection). So the marked methods are also
/// compiled ahead, while a pool is quiet (see <see cref="AddMarked"/> and <see cref="Prepare"/>; the stall monitor does
/// it between its ticks).</para>
/// </remarks>
internal static class RarePath
{
    /// <summary>The <see cref="MethodImplOptions"/> of a rare path: compiled fully optimised at its first call.</summary>
    public const MethodImplOptions Compile = MethodImplOptions.AggressiveOptimization;

    /// <summary>The members <see cref="AddMarked"/> reads: the type's methods and constructors.</summary>
    public const DynamicallyAccessedMemberTypes Members =
        DynamicallyAccessedMemberTypes.PublicMethods | DynamicallyAccessedMemberTypes.NonPublicMethods
        | DynamicallyAccessedMemberTypes.PublicConstructors | DynamicallyAccessedMemberTypes.NonPublicConstructors;

    /// <summary>
    /// Adds the methods and constructors <paramref name="type"/> declares with the <see cref="Compile"/> mark to
    /// <paramref name="methods"/>, with the type's arguments when it is a constructed generic type (its code is shared:
    /// the runtime needs them to find it). Adds nothing where code is not compiled at run time (NativeAOT).
    /// </summary>
    public static void AddMarked([DynamicallyAccessedMembers(Members)] Type type, List<PreparedMethod> methods)
    {
        if (!RuntimeFeature.IsDynamicCodeCompiled)
        {
            return;
        }
        RuntimeTypeHandle[]? instantiation = null;
        if (type.IsConstructedGenericType)
        {
            Type[] arguments = type.GetGenericArguments();
            instantiation = new RuntimeTypeHandle[arguments.Length];
            for (int i = 0; i < arguments.Length; i++)
            {
                instantiation[i] = arguments[i].TypeHandle;
            }
        }
        const BindingFlags Declared = BindingFlags.DeclaredOnly | BindingFlags.Instance | BindingFlags.Static
            | BindingFlags.Public | BindingFlags.NonPublic;
        foreach (MethodInfo method in type.GetMethods(Declared))
        {
            AddIfMarked(method, instantiation, methods);
        }
        foreach (ConstructorInfo constructor in type.GetConstructors(Declared))
        {
            AddIfMarked(constructor, instantiation, methods);
        }
    }

    private static void AddIfMarked(MethodBase method, RuntimeTypeHandle[]? instantiation, List<PreparedMethod> methods)
    {
        if ((method.MethodImplementationFlags & MethodImplAttributes.AggressiveOptimization) != 0 && !method.IsAbstract
            && !method.ContainsGenericParameters)
        {
            methods.Add(new PreparedMethod(method, instantiation));
        }
    }

    /// <summary>
    /// Compiles <paramref name="method"/> now, fully optimised (the mark's only tier), unless it already is. Never
    /// throws: a method the runtime cannot prepare ahead is compiled at its first call, as without this.
    /// </summary>
    public static void Prepare(PreparedMethod method)
    {
        try
        {
            if (method.Instantiation is null)
            {
                RuntimeHelpers.PrepareMethod(method.Method.MethodHandle);
            }
            else
            {
                RuntimeHelpers.PrepareMethod(method.Method.MethodHandle, method.Instantiation);
            }
        }
        catch (Exception)
        {
            // Nothing to undo: the method keeps its ordinary path, compiled at its first call.
        }
    }
}

/// <summary>A marked method to compile ahead and, for a method of a generic type, the type's arguments.</summary>
internal readonly record struct PreparedMethod(MethodBase Method, RuntimeTypeHandle[]? Instantiation);
