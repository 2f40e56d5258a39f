using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using Mono.Cecil;
using Mono.Cecil.Cil;

namespace Spindle.Tests.Architecture;

/// <summary>
/// What the architecture tests read from the built library: the folder of <c>src/Spindle</c> each type is written in,
/// the types each type uses (in signatures, fields, attributes and method bodies), and the fields each type writes.
/// </summary>
/// <remarks>
/// <para>Read from the compiled assembly with Mono.Cecil, so a use is a use the compiler emitted: comments and
/// <c>cref</c>s do not count, generic arguments and nested types do. A nested or compiler-generated type (a lambda's
/// closure, an iterator, a fixed buffer) counts as its outermost declaring type.</para>
/// <para>A type's folder comes from the documents its methods were compiled from (the portable PDB next to the
/// assembly), read relative to <c>src/Spindle/</c> so that CI's mapped paths (<c>/_/src/...</c>) work too; a type
/// without code (an interface, an enum, a struct of fields) is found by its declaration in the source tree. The root
/// folder is named <c>.</c>.</para>
/// </remarks>
internal sealed class LibraryModel
{
    private static readonly Lazy<LibraryModel> s_spindle = new(() => Load(typeof(WorkerPool).Assembly.Location));

    private readonly Dictionary<TypeDefinition, string> _folders = new();

    private LibraryModel(ModuleDefinition module, string sourceRoot)
    {
        Module = module;
        SourceRoot = sourceRoot;
        Dictionary<string, string> declared = ReadDeclarations(sourceRoot);
        foreach (TypeDefinition type in module.Types.Where(t => !t.Name.StartsWith('<')))
        {
            _folders[type] = FolderOf(type, declared);
        }
        Uses = ReadUses();
        Writes = ReadWrites();
    }

    /// <summary>The Spindle library, read once per test run.</summary>
    public static LibraryModel Spindle => s_spindle.Value;

    public ModuleDefinition Module { get; }

    /// <summary>The <c>src/Spindle</c> folder of the checkout the tests were built from.</summary>
    public string SourceRoot { get; }

    /// <summary>Top-level types and the folder each is written in.</summary>
    public IReadOnlyDictionary<TypeDefinition, string> Folders => _folders;

    /// <summary>Every use of one top-level type by another (distinct pairs).</summary>
    public IReadOnlyList<TypeUse> Uses { get; }

    /// <summary>Every field of a class written by code of another top-level type (distinct triples).</summary>
    public IReadOnlyList<FieldWrite> Writes { get; }

    public static LibraryModel Load(string assemblyPath)
    {
        var parameters = new ReaderParameters { ReadSymbols = true };
        ModuleDefinition module = ModuleDefinition.ReadModule(assemblyPath, parameters);
        return new LibraryModel(module, Path.Combine(RepositoryRoot(), "src", "Spindle"));
    }

    /// <summary>The checkout's root: the nearest folder above the test assembly that holds <c>Spindle.slnx</c>.</summary>
    public static string RepositoryRoot()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "Spindle.slnx")))
            {
                return dir.FullName;
            }
        }
        throw new InvalidOperationException($"No Spindle.slnx above {AppContext.BaseDirectory}.");
    }

    /// <summary>Source files of a folder tree, without build outputs.</summary>
    public static IEnumerable<string> SourceFiles(string root) =>
        Directory.EnumerateFiles(root, "*.cs", SearchOption.AllDirectories)
            .Where(f => !f.Contains($"{Path.DirectorySeparatorChar}obj{Path.DirectorySeparatorChar}", StringComparison.Ordinal)
                && !f.Contains($"{Path.DirectorySeparatorChar}bin{Path.DirectorySeparatorChar}", StringComparison.Ordinal));

    public string FolderOf(TypeReference type)
    {
        TypeDefinition? definition = Outermost(type)?.Resolve();
        return definition is not null && _folders.TryGetValue(definition, out string? folder) ? folder : "";
    }

    private static TypeReference? Outermost(TypeReference? type)
    {
        while (type is TypeSpecification specification)
        {
            type = specification.ElementType;
        }
        while (type?.DeclaringType is not null)
        {
            type = type.DeclaringType;
        }
        return type;
    }

    private static readonly Regex s_declaration = new(
        @"^(?:    )?(?:(?:public|internal|private|protected|static|sealed|abstract|readonly|ref|partial|unsafe|file)\s+)*(?:class|struct|interface|enum|record(?:\s+struct)?|delegate\s+[\w<>?,\s]+?)\s+(\w+)",
        RegexOptions.Multiline | RegexOptions.CultureInvariant);

    private static Dictionary<string, string> ReadDeclarations(string sourceRoot)
    {
        var declared = new Dictionary<string, string>(StringComparer.Ordinal);
        foreach (string file in SourceFiles(sourceRoot))
        {
            string folder = FolderName(Path.GetRelativePath(sourceRoot, file));
            foreach (Match match in s_declaration.Matches(File.ReadAllText(file)))
            {
                declared.TryAdd(match.Groups[1].Value, folder);
            }
        }
        return declared;
    }

    /// <summary>The folder part of a path relative to <c>src/Spindle</c> ("." for the root), with forward slashes.</summary>
    private static string FolderName(string relativePath)
    {
        string? folder = Path.GetDirectoryName(relativePath)?.Replace('\\', '/');
        return string.IsNullOrEmpty(folder) ? "." : folder;
    }

    private static string FolderOf(TypeDefinition type, Dictionary<string, string> declared)
    {
        var folders = new SortedSet<string>(StringComparer.Ordinal);
        CollectDocumentFolders(type, folders);
        if (folders.Count > 1)
        {
            // A type written in two folders belongs to neither: the layering test reports it.
            return string.Join("+", folders);
        }
        if (folders.Count == 1)
        {
            return folders.Min!;
        }
        string name = type.Name;
        int tick = name.IndexOf('`', StringComparison.Ordinal);
        if (tick > 0)
        {
            name = name[..tick];
        }
        return declared.TryGetValue(name, out string? folder) ? folder : "?";
    }

    private static void CollectDocumentFolders(TypeDefinition type, SortedSet<string> folders)
    {
        foreach (MethodDefinition method in type.Methods)
        {
            if (!method.DebugInformation.HasSequencePoints)
            {
                continue;
            }
            foreach (SequencePoint point in method.DebugInformation.SequencePoints)
            {
                string url = point.Document.Url.Replace('\\', '/');
                int at = url.LastIndexOf("src/Spindle/", StringComparison.Ordinal);
                if (at >= 0 && !url.Contains("/obj/", StringComparison.Ordinal))
                {
                    folders.Add(FolderName(url[(at + "src/Spindle/".Length)..]));
                }
            }
        }
        foreach (TypeDefinition nested in type.NestedTypes)
        {
            CollectDocumentFolders(nested, folders);
        }
    }

    private List<TypeUse> ReadUses()
    {
        var uses = new HashSet<TypeUse>();
        foreach (TypeDefinition outer in _folders.Keys)
        {
            foreach (TypeDefinition type in WithNested(outer))
            {
                void Use(TypeReference? used) => AddUse(uses, outer, used);
                Use(type.BaseType);
                foreach (InterfaceImplementation implemented in type.Interfaces)
                {
                    Use(implemented.InterfaceType);
                }
                foreach (CustomAttribute attribute in type.CustomAttributes)
                {
                    Use(attribute.AttributeType);
                }
                foreach (FieldDefinition field in type.Fields)
                {
                    Use(field.FieldType);
                }
                foreach (PropertyDefinition property in type.Properties)
                {
                    Use(property.PropertyType);
                }
                foreach (MethodDefinition method in type.Methods)
                {
                    Use(method.ReturnType);
                    foreach (ParameterDefinition parameter in method.Parameters)
                    {
                        Use(parameter.ParameterType);
                    }
                    if (!method.HasBody)
                    {
                        continue;
                    }
                    foreach (VariableDefinition variable in method.Body.Variables)
                    {
                        Use(variable.VariableType);
                    }
                    foreach (Instruction instruction in method.Body.Instructions)
                    {
                        switch (instruction.Operand)
                        {
                            case TypeReference typeOperand:
                                Use(typeOperand);
                                break;
                            case MethodReference methodOperand:
                                Use(methodOperand.DeclaringType);
                                Use(methodOperand.ReturnType);
                                foreach (ParameterDefinition parameter in methodOperand.Parameters)
                                {
                                    Use(parameter.ParameterType);
                                }
                                if (methodOperand is GenericInstanceMethod generic)
                                {
                                    foreach (TypeReference argument in generic.GenericArguments)
                                    {
                                        Use(argument);
                                    }
                                }
                                break;
                            case FieldReference fieldOperand:
                                Use(fieldOperand.DeclaringType);
                                Use(fieldOperand.FieldType);
                                break;
                        }
                    }
                }
            }
        }
        return uses.OrderBy(u => u.ToString(), StringComparer.Ordinal).ToList();
    }

    private void AddUse(HashSet<TypeUse> uses, TypeDefinition user, TypeReference? used)
    {
        if (used is null)
        {
            return;
        }
        if (used is GenericInstanceType generic)
        {
            foreach (TypeReference argument in generic.GenericArguments)
            {
                AddUse(uses, user, argument);
            }
        }
        TypeDefinition? target = Outermost(used)?.Resolve();
        if (target is null || target.Module != Module || target == user || !_folders.TryGetValue(target, out string? usedFolder))
        {
            return;
        }
        uses.Add(new TypeUse(user, target, _folders[user], usedFolder));
    }

    private static IEnumerable<TypeDefinition> WithNested(TypeDefinition type)
    {
        yield return type;
        foreach (TypeDefinition nested in type.NestedTypes)
        {
            foreach (TypeDefinition inner in WithNested(nested))
            {
                yield return inner;
            }
        }
    }

    /// <summary>
    /// Stores into a field of another top-level class, and addresses of such a field taken for anything but a read
    /// (<c>ref</c> arguments to <c>Interlocked</c>, to a struct's methods, or kept). A field of a struct belongs to the
    /// struct's holder, so only fields declared on classes count; a derived class writing its base's field counts.
    /// </summary>
    private List<FieldWrite> ReadWrites()
    {
        var writes = new HashSet<FieldWrite>();
        foreach (TypeDefinition outer in _folders.Keys)
        {
            foreach (TypeDefinition type in WithNested(outer))
            {
                foreach (MethodDefinition method in type.Methods.Where(m => m.HasBody))
                {
                    foreach (Instruction instruction in method.Body.Instructions)
                    {
                        if (instruction.Operand is not FieldReference reference || !IsWrite(instruction))
                        {
                            continue;
                        }
                        FieldDefinition? field = reference.Resolve();
                        if (field is null || field.Module != Module || field.DeclaringType.IsValueType)
                        {
                            continue;
                        }
                        TypeDefinition? owner = Outermost(field.DeclaringType)?.Resolve();
                        if (owner is not null && owner != outer)
                        {
                            writes.Add(new FieldWrite(outer, owner, field.Name));
                        }
                    }
                }
            }
        }
        return writes.OrderBy(w => w.ToString(), StringComparer.Ordinal).ToList();
    }

    private static bool IsWrite(Instruction instruction)
    {
        OpCode code = instruction.OpCode;
        if (code == OpCodes.Stfld || code == OpCodes.Stsfld)
        {
            return true;
        }
        if (code != OpCodes.Ldflda && code != OpCodes.Ldsflda)
        {
            return false;
        }
        // An address taken to read through: a field of the struct there (possibly nested), or Volatile.Read.
        Instruction? next = instruction.Next;
        while (next is not null && next.OpCode == OpCodes.Ldflda)
        {
            next = next.Next;
        }
        if (next is null)
        {
            return true;
        }
        if (next.OpCode == OpCodes.Ldfld || next.OpCode == OpCodes.Ldobj)
        {
            return false;
        }
        return !(next.OpCode == OpCodes.Call && next.Operand is MethodReference called
            && called.DeclaringType.FullName == "System.Threading.Volatile" && called.Name == "Read");
    }
}

/// <summary><paramref name="User"/> names <paramref name="Used"/> in its code or signatures.</summary>
internal sealed record TypeUse(TypeDefinition User, TypeDefinition Used, string UserFolder, string UsedFolder)
{
    public override string ToString() => $"{User.Name} -> {Used.Name}";
}

/// <summary>Code of <paramref name="Writer"/> writes field <paramref name="Field"/> of <paramref name="Owner"/>.</summary>
internal sealed record FieldWrite(TypeDefinition Writer, TypeDefinition Owner, string Field)
{
    public override string ToString() => $"{Writer.Name} writes {Owner.Name}.{Field}";
}
