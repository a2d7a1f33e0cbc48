using System;
using System.Collections.Generic;
using System.Globalization;
using System.Reflection;
using Newtonsoft.Json;
using Newtonsoft.Json.Converters;
using Newtonsoft.Json.Linq;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>JSON Schema of a tool's arguments, derived from the public fields and properties of a type.</summary>
    /// <remarks>
    /// string: "string"; integral types: "integer"; float, double, decimal: "number"; bool: "boolean"; an enum: a
    /// string with its member names. Every argument is required except Nullable&lt;T&gt; ones and those marked
    /// [ToolParameter(..., Optional = true)]. Names are camelCase; descriptions come from [ToolParameter].
    /// </remarks>
    internal static class ToolSchema
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
}
