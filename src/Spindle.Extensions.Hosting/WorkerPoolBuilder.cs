using System.Collections;
using System.Collections.Generic;
using Microsoft.Extensions.DependencyInjection;

namespace Spindle.Extensions.Hosting;

/// <summary>The <see cref="IWorkerPoolBuilder"/> of one registered pool: its name, and its collection's members.</summary>
internal sealed class WorkerPoolBuilder(IServiceCollection services, string name) : IWorkerPoolBuilder
{
    public string Name { get; } = name;

    public IServiceCollection Services { get; } = services;

    public ServiceDescriptor this[int index]
    {
        get => Services[index];
        set => Services[index] = value;
    }

    public int Count => Services.Count;

    public bool IsReadOnly => Services.IsReadOnly;

    public void Add(ServiceDescriptor item) => Services.Add(item);

    public void Clear() => Services.Clear();

    public bool Contains(ServiceDescriptor item) => Services.Contains(item);

    public void CopyTo(ServiceDescriptor[] array, int arrayIndex) => Services.CopyTo(array, arrayIndex);

    public IEnumerator<ServiceDescriptor> GetEnumerator() => Services.GetEnumerator();

    public int IndexOf(ServiceDescriptor item) => Services.IndexOf(item);

    public void Insert(int index, ServiceDescriptor item) => Services.Insert(index, item);

    public bool Remove(ServiceDescriptor item) => Services.Remove(item);

    public void RemoveAt(int index) => Services.RemoveAt(index);

    IEnumerator IEnumerable.GetEnumerator() => GetEnumerator();
}
