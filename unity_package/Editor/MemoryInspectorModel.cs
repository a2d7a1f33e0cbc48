using System;
using System.Collections.Generic;
using System.IO;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// The data behind the memory inspector window, read and changed through the core's API (the
    /// runtime's memory store); no editor UI, so it can be tested on its own.
    /// </summary>
    public sealed class MemoryInspectorModel
    {
        // A stem the store escaped (invalid file-name characters) ends in _ + 8 hex digits; scoped keys are hashes.
        private static readonly Regex OpaqueStem = new Regex("^(scope-v1-|actor-v1-)|_[0-9a-f]{8}$");

        private readonly CoreAIRuntimeClient client;
        private readonly RuntimeAgentMemoryStore store;
        private readonly string persistentDataPath;

        /// <summary>An inspector over `client`'s runtime; `persistentDataPath` adds roles that only exist as saves.</summary>
        public MemoryInspectorModel(CoreAIRuntimeClient client, string persistentDataPath)
        {
            if (client == null) throw new ArgumentNullException(nameof(client));
            this.client = client;
            store = client.CreateMemoryStore();
            this.persistentDataPath = persistentDataPath;
        }

        /// <summary>Roles the runtime's policy knows, plus roles with saves on disk (unscoped keys only), sorted.</summary>
        public async Task<List<string>> ListRolesAsync(CancellationToken cancel = default(CancellationToken))
        {
            SortedSet<string> roles = new SortedSet<string>(StringComparer.Ordinal);
            foreach (RoleMemoryConfig role in await client.ListRolesAsync(cancel).ConfigureAwait(false)) roles.Add(role.RoleId);
            foreach (string saved in SavedRoleIds(persistentDataPath)) roles.Add(saved);
            return new List<string>(roles);
        }

        /// <summary>Role ids readable from `&lt;persistentDataPath&gt;/CoreAI/AgentMemory` file names (hashed or escaped keys are skipped).</summary>
        public static List<string> SavedRoleIds(string persistentDataPath)
        {
            List<string> ids = new List<string>();
            if (string.IsNullOrEmpty(persistentDataPath)) return ids;
            string folder = Path.Combine(Path.Combine(persistentDataPath, "CoreAI"), "AgentMemory");
            if (!Directory.Exists(folder)) return ids;
            foreach (string file in Directory.GetFiles(folder))
            {
                string name = Path.GetFileName(file);
                string stem;
                if (name.EndsWith(".history.jsonl", StringComparison.Ordinal)) stem = name.Substring(0, name.Length - ".history.jsonl".Length);
                else if (name.EndsWith(".json", StringComparison.Ordinal)) stem = name.Substring(0, name.Length - ".json".Length);
                else continue;
                if (stem.Length == 0 || OpaqueStem.IsMatch(stem) || ids.Contains(stem)) continue;
                ids.Add(stem);
            }
            ids.Sort(StringComparer.Ordinal);
            return ids;
        }

        /// <summary>The role's memory document, versions and chat history.</summary>
        public async Task<RoleMemoryView> LoadAsync(string roleId, CancellationToken cancel = default(CancellationToken))
        {
            AgentMemoryState state = await store.TryLoadAsync(roleId, cancel).ConfigureAwait(false);
            IReadOnlyList<AgentMemoryVersion> versions = await store.ListVersionsAsync(roleId, cancel).ConfigureAwait(false);
            ChatMessage[] chat = await store.GetChatHistoryAsync(roleId, 0, cancel).ConfigureAwait(false);
            return new RoleMemoryView
            {
                RoleId = roleId,
                HasMemory = state != null,
                Memory = state == null ? "" : state.Memory ?? "",
                Versions = versions ?? new AgentMemoryVersion[0],
                ChatHistory = chat ?? new ChatMessage[0],
            };
        }

        /// <summary>Unified diff between two retained versions (0 = the empty document).</summary>
        public Task<string> DiffAsync(string roleId, int fromVersion, int toVersion, CancellationToken cancel = default(CancellationToken))
        {
            return store.DiffVersionsAsync(roleId, fromVersion, toVersion, cancel);
        }

        /// <summary>Restores a version (recorded as a new `revert` version).</summary>
        public Task<MemoryToolResult> RevertAsync(string roleId, int version, CancellationToken cancel = default(CancellationToken))
        {
            return store.RevertAsync(roleId, version, cancel);
        }
    }
}
