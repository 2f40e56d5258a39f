using System;
using Microsoft.Extensions.Options;

namespace Spindle.Extensions.Hosting;

/// <summary>
/// Keeps a registered pool's <see cref="WorkerPoolOptions.Name"/> equal to the name it is registered under, so that the
/// pool's name (the one its threads, metrics and events carry) is always its service key (the one the package's logs
/// and <see cref="IWorkerPoolProvider"/> use). Registration sets the name first; a configuration section or a delegate
/// that then sets another one makes the options invalid, with a message that names both. Options names that are not
/// registered pools are left alone.
/// </summary>
internal sealed class WorkerPoolNameValidation : IValidateOptions<WorkerPoolOptions>
{
    private readonly WorkerPoolRegistry _registry;

    public WorkerPoolNameValidation(WorkerPoolRegistry registry) => _registry = registry;

    public ValidateOptionsResult Validate(string? name, WorkerPoolOptions options)
    {
        if (name is null || !_registry.Contains(name))
        {
            return ValidateOptionsResult.Skip;
        }
        if (string.Equals(options.Name, name, StringComparison.Ordinal))
        {
            return ValidateOptionsResult.Success;
        }
        return ValidateOptionsResult.Fail(
            $"Name is '{options.Name}', but a registered pool is named by the name it is registered under, '{name}' " +
            $"(compared ordinally): remove the Name setting or set it to '{name}'.");
    }
}
