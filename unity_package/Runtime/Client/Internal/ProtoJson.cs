using System;
using System.Collections.Generic;
using System.Globalization;
using System.Reflection;
using System.Runtime.Serialization;
using Newtonsoft.Json;

namespace CoreAI.Runtime
{
    /// <summary>proto3 JSON settings shared by every call: the runtime's JSON is the contract's.</summary>
    internal static class ProtoJson
    {
        /// <summary>Settings for requests and responses (unknown fields are ignored, like proto3 JSON parsers).</summary>
        public static readonly JsonSerializerSettings Settings = new JsonSerializerSettings
        {
            MissingMemberHandling = MissingMemberHandling.Ignore,
            NullValueHandling = NullValueHandling.Ignore,
            DateParseHandling = DateParseHandling.None,
            FloatParseHandling = FloatParseHandling.Double,
            Formatting = Formatting.None,
        };

        /// <summary>The proto3 JSON text of a message.</summary>
        public static string Serialize(object message)
        {
            return JsonConvert.SerializeObject(message, Settings);
        }

        /// <summary>A message parsed from proto3 JSON; an empty text is the empty message.</summary>
        public static T Deserialize<T>(string json) where T : new()
        {
            if (string.IsNullOrWhiteSpace(json))
            {
                return new T();
            }
            T value = JsonConvert.DeserializeObject<T>(json, Settings);
            return value == null ? new T() : value;
        }
    }

    /// <summary>int64/uint64 as proto3 JSON: written as a decimal string, read from a string or a number.</summary>
    [Preserve]  // created by reflection from [JsonConverter(typeof(...))]
    internal sealed class ProtoInt64Converter : JsonConverter
    {
        /// <summary>Handles long, ulong and their nullable forms.</summary>
        public override bool CanConvert(Type objectType)
        {
            Type t = Nullable.GetUnderlyingType(objectType) ?? objectType;
            return t == typeof(long) || t == typeof(ulong);
        }

        /// <summary>Reads "123", 123 or null.</summary>
        public override object ReadJson(JsonReader reader, Type objectType, object existingValue, JsonSerializer serializer)
        {
            Type t = Nullable.GetUnderlyingType(objectType) ?? objectType;
            if (reader.TokenType == JsonToken.Null)
            {
                return Nullable.GetUnderlyingType(objectType) != null ? null : Activator.CreateInstance(t);
            }
            string text = Convert.ToString(reader.Value, CultureInfo.InvariantCulture);
            try
            {
                if (t == typeof(ulong))
                {
                    return ulong.Parse(text, NumberStyles.Integer, CultureInfo.InvariantCulture);
                }
                return long.Parse(text, NumberStyles.Integer, CultureInfo.InvariantCulture);
            }
            catch (FormatException)
            {
                throw new JsonSerializationException("not a 64-bit integer: " + text);
            }
            catch (OverflowException)
            {
                throw new JsonSerializationException("64-bit integer out of range: " + text);
            }
        }

        /// <summary>Writes the value as a decimal string.</summary>
        public override void WriteJson(JsonWriter writer, object value, JsonSerializer serializer)
        {
            if (value == null)
            {
                writer.WriteNull();
                return;
            }
            writer.WriteValue(Convert.ToString(value, CultureInfo.InvariantCulture));
        }
    }

    /// <summary>proto enums as proto3 JSON: written as the value name, read from a name or a number.</summary>
    /// <remarks>An unknown name reads as 0 (UNSPECIFIED) so a newer runtime does not break an older game.</remarks>
    [Preserve]  // created by reflection from [JsonConverter(typeof(...))]
    internal sealed class ProtoEnumConverter : JsonConverter
    {
        private static readonly Dictionary<Type, Dictionary<string, object>> ByName = new Dictionary<Type, Dictionary<string, object>>();
        private static readonly Dictionary<Type, Dictionary<object, string>> ByValue = new Dictionary<Type, Dictionary<object, string>>();

        /// <summary>Handles enums and nullable enums.</summary>
        public override bool CanConvert(Type objectType)
        {
            Type t = Nullable.GetUnderlyingType(objectType) ?? objectType;
            return t.IsEnum;
        }

        /// <summary>Reads a value name, a number or null.</summary>
        public override object ReadJson(JsonReader reader, Type objectType, object existingValue, JsonSerializer serializer)
        {
            bool nullable = Nullable.GetUnderlyingType(objectType) != null;
            Type t = Nullable.GetUnderlyingType(objectType) ?? objectType;
            if (reader.TokenType == JsonToken.Null)
            {
                return nullable ? null : Enum.ToObject(t, 0);
            }
            if (reader.TokenType == JsonToken.Integer)
            {
                return Enum.ToObject(t, Convert.ToInt32(reader.Value, CultureInfo.InvariantCulture));
            }
            string name = Convert.ToString(reader.Value, CultureInfo.InvariantCulture);
            object value;
            return Names(t).TryGetValue(name, out value) ? value : Enum.ToObject(t, 0);
        }

        /// <summary>Writes the proto value name.</summary>
        public override void WriteJson(JsonWriter writer, object value, JsonSerializer serializer)
        {
            if (value == null)
            {
                writer.WriteNull();
                return;
            }
            string name;
            if (Values(value.GetType()).TryGetValue(value, out name))
            {
                writer.WriteValue(name);
            }
            else
            {
                writer.WriteValue(Convert.ToInt32(value, CultureInfo.InvariantCulture));
            }
        }

        private static Dictionary<string, object> Names(Type t)
        {
            Load(t);
            lock (ByName)
            {
                return ByName[t];
            }
        }

        private static Dictionary<object, string> Values(Type t)
        {
            Load(t);
            lock (ByName)
            {
                return ByValue[t];
            }
        }

        private static void Load(Type t)
        {
            lock (ByName)
            {
                if (ByName.ContainsKey(t))
                {
                    return;
                }
                var names = new Dictionary<string, object>(StringComparer.Ordinal);
                var values = new Dictionary<object, string>();
                foreach (FieldInfo field in t.GetFields(BindingFlags.Public | BindingFlags.Static))
                {
                    object value = field.GetValue(null);
                    var member = (EnumMemberAttribute)Attribute.GetCustomAttribute(field, typeof(EnumMemberAttribute));
                    string name = member != null && member.Value != null ? member.Value : field.Name;
                    names[name] = value;
                    names[field.Name] = value;
                    values[value] = name;
                }
                ByName[t] = names;
                ByValue[t] = values;
            }
        }
    }
}
