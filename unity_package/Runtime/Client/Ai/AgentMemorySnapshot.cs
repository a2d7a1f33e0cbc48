using System;
using CoreAI.Runtime;
using Newtonsoft.Json;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>All data of one scope (memory, versions, chat, transcript, summaries) as a save-slot blob.</summary>
    public sealed class AgentMemorySnapshot
    {
        /// <summary>Wraps a proto snapshot.</summary>
        public AgentMemorySnapshot(V1.ScopeSnapshot proto)
        {
            Proto = proto ?? throw new ArgumentNullException("proto");
        }

        /// <summary>The proto snapshot.</summary>
        public V1.ScopeSnapshot Proto { get; }

        /// <summary>The scope it was exported from.</summary>
        public AgentMemoryScope Scope => ProtoMapping.FromProto(Proto.Scope);

        /// <summary>Number of identities (role x actor) it holds.</summary>
        public int RoleCount => Proto.Roles.Count;

        /// <summary>The snapshot as proto3 JSON (write it to a save file or a cloud save).</summary>
        public string ToJson()
        {
            return ProtoJson.Serialize(Proto);
        }

        /// <summary>A snapshot read back from <see cref="ToJson"/>.</summary>
        /// <exception cref="ArgumentException">The text is not a snapshot.</exception>
        public static AgentMemorySnapshot FromJson(string json)
        {
            if (string.IsNullOrWhiteSpace(json))
            {
                throw new ArgumentException("the snapshot JSON is empty", "json");
            }
            try
            {
                return new AgentMemorySnapshot(ProtoJson.Deserialize<V1.ScopeSnapshot>(json));
            }
            catch (JsonException ex)
            {
                throw new ArgumentException("not a snapshot: " + ex.Message, "json", ex);
            }
        }
    }
}
