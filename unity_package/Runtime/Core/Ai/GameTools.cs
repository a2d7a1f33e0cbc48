using System;
using System.Collections.Generic;
using System.Globalization;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Converters;
using Newtonsoft.Json.Linq;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>Describes an argument of a game tool (a public field or property of its TArgs) for the model.</summary>
    [AttributeUsage(AttributeTargets.Field | AttributeTargets.Property)]
    public sealed class ToolParameterAttribute : Attribute
    {
        /// <summary>An argument with this description.</summary>
        public ToolParameterAttribute(string description)
        {
            Description = description ?? "";
        }

        /// <summary>What the argument means (shown to the model).</summary>
        public string Description { get; }

        /// <summary>True: the model may leave it out (Nullable&lt;T&gt; arguments are optional anyway).</summary>
        public bool Optional { get; set; }
    }

    /// <summary>What a game tool gives back to the model; Success false is a failure the model sees.</summary>
    public sealed class ToolResult
    {
        /// <summary>A result.</summary>
        public ToolResult(bool success, string content)
        {
            Success = success;
            Content = content ?? "";
        }

        /// <summary>True when the tool did what was asked.</summary>
        public bool Success { get; }

        /// <summary>What the model reads.</summary>
        public string Content { get; }

        /// <summary>A success with this content.</summary>
        public static ToolResult Ok(string content)
        {
            return new ToolResult(true, content);
        }

        /// <summary>A failure with this explanation.</summary>
        public static ToolResult Fail(string content)
        {
            return new ToolResult(false, content);
        }
    }

    /// <summary>A tool the game executes (docs/game-tools.md): its declaration and its handler.</summary>
    public sealed class GameTool
    {
        private readonly Func<string, CancellationToken, Task<ToolResult>> _invoke;

        internal GameTool(string name, string description, string parametersJsonSchema, bool runOnMainThread,
            Func<string, CancellationToken, Task<ToolResult>> invoke)
        {
            Name = name;
            Description = description;
            ParametersJsonSchema = parametersJsonSchema;
            RunOnMainThread = runOnMainThread;
            _invoke = invoke;
        }

        /// <summary>The tool name the model calls.</summary>
        public string Name { get; }

        /// <summary>What the tool does (shown to the model).</summary>
        public string Description { get; }

        /// <summary>The JSON Schema of the arguments.</summary>
        public string ParametersJsonSchema { get; }

        /// <summary>True: the handler runs on the SynchronizationContext of the turn's caller (Unity's main thread).</summary>
        public bool RunOnMainThread { get; }

        /// <summary>A typed tool: arguments parsed into TArgs, handler's result (or exception) as the tool's result.</summary>
        /// <remarks>TArgs is constructed with its parameterless constructor and then filled in: the constructor is referenced
        /// here, so IL2CPP's linker keeps it (reflection alone would not); [Preserve] on TArgs keeps its fields.</remarks>
        public static GameTool Create<TArgs>(string name, string description,
            Func<TArgs, CancellationToken, Task<ToolResult>> handler, bool runOnMainThread = true)
            where TArgs : new()
        {
            if (string.IsNullOrWhiteSpace(name)) throw new ArgumentException("a tool needs a name", "name");
            if (string.IsNullOrWhiteSpace(description)) throw new ArgumentException("a tool needs a description", "description");
            if (handler == null) throw new ArgumentNullException("handler");
            string schema = ToolSchema.For(typeof(TArgs));
            Func<string, CancellationToken, Task<ToolResult>> invoke = (json, token) =>
                handler(ToolSchema.Populate(new TArgs(), json), token);
            return new GameTool(name.Trim(), description.Trim(), schema, runOnMainThread, invoke);
        }

        /// <summary>Run the handler with the call's arguments; an exception becomes a failed result.</summary>
        public async Task<ToolResult> InvokeAsync(string argumentsJson, CancellationToken cancellationToken)
        {
            try
            {
                Task<ToolResult> running = _invoke(argumentsJson ?? "{}", cancellationToken);
                ToolResult result = running == null ? null : await running;
                return result ?? ToolResult.Ok("DONE");
            }
            catch (OperationCanceledException) when (cancellationToken.IsCancellationRequested)
            {
                throw;
            }
            catch (Exception e)
            {
                string detail = (e.Message ?? "").Trim();
                return ToolResult.Fail("tool '" + Name + "' failed: " + e.GetType().Name + (detail.Length > 0 ? ": " + detail : ""));
            }
        }

        internal V1.ClientToolDefinition ToProto()
        {
            return new V1.ClientToolDefinition { Name = Name, Description = Description, ParametersJsonSchema = ParametersJsonSchema };
        }
    }

    /// <summary>JSON Schema of a tool's arguments, derived from the public fields and properties of a type.</summary>
    /// <remarks>
    /// string: "string"; integral types: "integer"; float, double, decimal: "number"; bool: "boolean"; an enum: a
    /// string with its member names. Every argument is required except Nullable&lt;T&gt; ones and those marked
    /// [ToolParameter(..., Optional = true)]. Names are camelCase; descriptions come from [ToolParameter].
    /// </remarks>
    public static class ToolSchema
    {
        private static readonly JsonSerializerSettings ParseSettings = new JsonSerializerSettings
        {
            Converters = { new StringEnumConverter() },
            MissingMemberHandling = MissingMemberHandling.Ignore,
        };

        /// <summary>The schema (JSON text) of type's public instance fields and properties.</summary>
        public static string For(Type type)
        {
            if (type == null) throw new ArgumentNullException("type");
            var properties = new JObject();
            var required = new JArray();
            foreach (MemberInfo member in Members(type))
            {
                Type memberType = member is FieldInfo ? ((FieldInfo)member).FieldType : ((PropertyInfo)member).PropertyType;
                Type underlying = Nullable.GetUnderlyingType(memberType);
                var attribute = (ToolParameterAttribute)Attribute.GetCustomAttribute(member, typeof(ToolParameterAttribute));
                JObject schema = TypeSchema(underlying ?? memberType, type.Name + "." + member.Name);
                if (attribute != null && attribute.Description.Length > 0) schema["description"] = attribute.Description;
                string name = CamelCase(member.Name);
                properties[name] = schema;
                if (underlying == null && (attribute == null || !attribute.Optional)) required.Add(name);
            }
            var root = new JObject { ["type"] = "object", ["properties"] = properties };
            if (required.Count > 0) root["required"] = required;
            root["additionalProperties"] = false;
            return root.ToString(Formatting.None);
        }

        /// <summary>Arguments JSON (already valid against the schema) as a TArgs.</summary>
        public static T Parse<T>(string json)
        {
            return JsonConvert.DeserializeObject<T>(string.IsNullOrEmpty(json) ? "{}" : json, ParseSettings);
        }

        /// <summary>Arguments JSON (already valid against the schema) filled into `args` (built by the caller); returns it.</summary>
        public static T Populate<T>(T args, string json)
        {
            object boxed = args;  // a struct is filled in its box
            if (boxed == null) throw new ArgumentNullException("args");
            JsonConvert.PopulateObject(string.IsNullOrEmpty(json) ? "{}" : json, boxed, ParseSettings);
            return (T)boxed;
        }

        private static IEnumerable<MemberInfo> Members(Type type)
        {
            foreach (FieldInfo field in type.GetFields(BindingFlags.Public | BindingFlags.Instance))
            {
                if (!field.IsInitOnly) yield return field;
            }
            foreach (PropertyInfo property in type.GetProperties(BindingFlags.Public | BindingFlags.Instance))
            {
                if (property.CanWrite && property.GetSetMethod() != null && property.GetIndexParameters().Length == 0) yield return property;
            }
        }

        private static JObject TypeSchema(Type type, string where)
        {
            if (type == typeof(string)) return new JObject { ["type"] = "string" };
            if (type == typeof(bool)) return new JObject { ["type"] = "boolean" };
            if (type == typeof(float) || type == typeof(double) || type == typeof(decimal)) return new JObject { ["type"] = "number" };
            if (type == typeof(int) || type == typeof(long) || type == typeof(short) || type == typeof(byte)
                || type == typeof(uint) || type == typeof(ulong) || type == typeof(ushort) || type == typeof(sbyte))
            {
                return new JObject { ["type"] = "integer" };
            }
            if (type.IsEnum)
            {
                return new JObject { ["type"] = "string", ["enum"] = new JArray(Enum.GetNames(type)) };
            }
            throw new NotSupportedException("tool argument " + where + " has type " + type.Name
                + "; supported: string, integral and floating-point numbers, bool, enums (and their Nullable forms)");
        }

        private static string CamelCase(string name)
        {
            return name.Length == 0 ? name : char.ToLower(name[0], CultureInfo.InvariantCulture) + name.Substring(1);
        }
    }

    /// <summary>The game tools of each role (filled by <see cref="AgentBuilder.WithTool{TArgs}(string, string, Func{TArgs, Task{string}}, bool)"/>).</summary>
    public sealed class GameToolRegistry
    {
        private readonly object _lock = new object();
        private readonly Dictionary<string, List<GameTool>> _tools = new Dictionary<string, List<GameTool>>(StringComparer.Ordinal);

        /// <summary>Replace a role's tools.</summary>
        public void Set(string roleId, IEnumerable<GameTool> tools)
        {
            string role = AgentMemoryPolicy.NormalizeRoleId(roleId);
            var list = new List<GameTool>(tools ?? new GameTool[0]);
            var names = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
            foreach (GameTool tool in list)
            {
                if (!names.Add(tool.Name)) throw new ArgumentException("tool '" + tool.Name + "' is given twice for role " + role);
            }
            lock (_lock)
            {
                if (list.Count == 0) _tools.Remove(role);
                else _tools[role] = list;
            }
        }

        /// <summary>A role's tools (empty when it has none).</summary>
        public IReadOnlyList<GameTool> For(string roleId)
        {
            string role = AgentMemoryPolicy.NormalizeRoleId(roleId);
            lock (_lock)
            {
                List<GameTool> tools;
                return _tools.TryGetValue(role, out tools) ? tools.ToArray() : new GameTool[0];
            }
        }
    }
}
