using System;
using System.Collections.Generic;

namespace CoreAI.Ai
{
    /// <summary>
    /// The role table: built-in roles plus configured ones; a role it does not know gets the defaults
    /// (memory tool and chat history on). Thread-safe; hands out copies.
    /// </summary>
    /// <remarks>
    /// How it reaches the runtime: a <see cref="CoreAI.Runtime.CoreAIRuntimeClient"/> holds one policy and,
    /// before a turn or a memory-tool call of a role, pushes that role's config with the ConfigureRole RPC
    /// if it changed since the last push (<see cref="CoreAI.Runtime.CoreAIRuntimeClient.SyncPolicyAsync"/>
    /// pushes every changed role at once). Built-in roles the game never touched are not pushed: the runtime
    /// has the same table.
    /// </remarks>
    public sealed class AgentMemoryPolicy
    {
        /// <summary>Default window of chat messages per request.</summary>
        public const int DefaultMaxChatHistoryMessages = 30;

        /// <summary>The built-in roles (contract §6).</summary>
        public static readonly IReadOnlyList<string> BuiltInRoleIds = new[]
        {
            "Creator", "Builder", "Analyzer", "Programmer", "CoreMechanicAI", "AINpc", "PlainChat", "SmartChat", "Merchant",
        };

        private static AgentMemoryPolicy defaultPolicy = new AgentMemoryPolicy();

        private readonly object _lock = new object();
        private readonly Dictionary<string, RoleMemoryConfig> _roles = new Dictionary<string, RoleMemoryConfig>(StringComparer.Ordinal);
        private readonly Dictionary<string, long> _changedAt = new Dictionary<string, long>(StringComparer.Ordinal);
        private long _revision;

        /// <summary>A policy with the built-in role table.</summary>
        public AgentMemoryPolicy()
        {
            foreach (RoleMemoryConfig config in BuiltInRoles())
            {
                _roles[config.RoleId] = config;
            }
        }

        /// <summary>The process-wide policy: what <c>new AgentBuilder(role).Build()</c> registers into and a runtime client uses unless given another.</summary>
        public static AgentMemoryPolicy Default => System.Threading.Volatile.Read(ref defaultPolicy);

        /// <summary>
        /// A fresh <see cref="Default"/> (the built-in roles only), as a domain reload gives: called at the start of every
        /// play (Unity's SubsystemRegistration, CoreAI.UnityIntegration.CoreAIStaticState), so roles a game configured in
        /// one play are not there in the next when "Enter Play Mode Options" turn the domain reload off.
        /// </summary>
        internal static void ResetDefault()
        {
            System.Threading.Volatile.Write(ref defaultPolicy, new AgentMemoryPolicy());
        }

        /// <summary>The game tools of each role (docs/game-tools.md), sent with each of its turns.</summary>
        public GameToolRegistry Tools { get; } = new GameToolRegistry();

        /// <summary>Increases with every change.</summary>
        public long Revision
        {
            get { lock (_lock) { return _revision; } }
        }

        /// <summary>A copy of the role's config; an unknown role gets the defaults under its (trimmed) id.</summary>
        public RoleMemoryConfig GetConfig(string roleId)
        {
            string role = NormalizeRoleId(roleId);
            lock (_lock)
            {
                RoleMemoryConfig config;
                return _roles.TryGetValue(role, out config) ? config.Clone() : new RoleMemoryConfig(role);
            }
        }

        /// <summary>True for a built-in or configured role.</summary>
        public bool IsKnown(string roleId)
        {
            string role = NormalizeRoleId(roleId);
            lock (_lock)
            {
                return _roles.ContainsKey(role);
            }
        }

        /// <summary>Copies of every built-in and configured role, sorted by id.</summary>
        public IReadOnlyList<RoleMemoryConfig> Roles
        {
            get
            {
                lock (_lock)
                {
                    var list = new List<RoleMemoryConfig>();
                    foreach (RoleMemoryConfig config in _roles.Values)
                    {
                        list.Add(config.Clone());
                    }
                    list.Sort((a, b) => string.CompareOrdinal(a.RoleId, b.RoleId));
                    return list;
                }
            }
        }

        /// <summary>Register or replace a role's config (the policy keeps its own validated copy).</summary>
        public void SetConfig(RoleMemoryConfig config)
        {
            if (config == null)
            {
                throw new ArgumentNullException("config");
            }
            RoleMemoryConfig copy = config.Clone();
            copy.Validate();
            lock (_lock)
            {
                Store(copy);
            }
        }

        /// <summary>Change the named settings of a role (others keep their value); returns a copy of the result.</summary>
        /// <remarks>
        /// The first four parameters keep the design note's order (roleId, useMemoryTool, defaultAction,
        /// allowDuplicateToolCalls), so positional calls written against it bind as they did.
        /// maxOutputTokens 0 = unlimited; contextWindowTokens is the design note's name of contextTokens.
        /// </remarks>
        /// <example><c>policy.ConfigureRole("Creator", defaultAction: MemoryToolAction.Write);</c></example>
        /// <exception cref="NotSupportedException">allowDuplicateToolCalls: true (the runtime always refuses an exact repeat of the previous call).</exception>
        public RoleMemoryConfig ConfigureRole(
            string roleId,
            bool? useMemoryTool = null,
            MemoryToolAction? defaultAction = null,
            bool? allowDuplicateToolCalls = null,
            bool? withChatHistory = null,
            bool? persistChatHistory = null,
            int? maxChatHistoryMessages = null,
            int? contextTokens = null,
            int? maxOutputTokens = null,
            int? maxToolCallRoundtrips = null,
            ToolResultMemory? toolResultMemory = null,
            double? temperature = null,
            bool? useLlmContextCompaction = null,
            double? compactionTriggerRatio = null,
            int? maxMemoryChars = null,
            string systemPrompt = null,
            int? contextWindowTokens = null)
        {
            if (allowDuplicateToolCalls == true)
            {
                // Refused loudly rather than ignored: the tool loop answers an exact repeat with an explanatory error (contract §7).
                throw new NotSupportedException(
                    "allowDuplicateToolCalls: true is not supported: the runtime answers an exact repeat of the previous tool call with an error result");
            }
            if (contextWindowTokens.HasValue && contextTokens.HasValue && contextWindowTokens.Value != contextTokens.Value)
            {
                throw new ArgumentException("contextTokens and contextWindowTokens name the same setting; give one of them", "contextWindowTokens");
            }
            if (contextWindowTokens.HasValue)
            {
                contextTokens = contextWindowTokens;
            }
            return Update(roleId, c =>
            {
                if (useMemoryTool.HasValue) c.UseMemoryTool = useMemoryTool.Value;
                if (defaultAction.HasValue) c.DefaultAction = defaultAction.Value;
                if (withChatHistory.HasValue) c.WithChatHistory = withChatHistory.Value;
                if (persistChatHistory.HasValue) c.PersistChatHistory = persistChatHistory.Value;
                if (maxChatHistoryMessages.HasValue) c.MaxChatHistoryMessages = maxChatHistoryMessages.Value;
                if (contextTokens.HasValue) c.ContextTokens = contextTokens.Value;
                if (maxOutputTokens.HasValue) c.MaxOutputTokens = maxOutputTokens.Value;
                if (maxToolCallRoundtrips.HasValue) c.MaxToolCallRoundtrips = maxToolCallRoundtrips.Value;
                if (toolResultMemory.HasValue) c.ToolResultMemory = toolResultMemory.Value;
                if (temperature.HasValue) c.Temperature = temperature.Value;
                if (useLlmContextCompaction.HasValue) c.UseLlmContextCompaction = useLlmContextCompaction.Value;
                if (compactionTriggerRatio.HasValue) c.CompactionTriggerRatio = compactionTriggerRatio.Value;
                if (maxMemoryChars.HasValue) c.MaxMemoryChars = maxMemoryChars.Value;
                if (systemPrompt != null) c.SystemPrompt = systemPrompt;
            });
        }

        /// <summary>Turn the memory tool on for a role.</summary>
        public void EnableMemoryTool(string roleId)
        {
            ConfigureRole(roleId, useMemoryTool: true);
        }

        /// <summary>Turn the memory tool off for a role.</summary>
        public void DisableMemoryTool(string roleId)
        {
            ConfigureRole(roleId, useMemoryTool: false);
        }

        /// <summary>Turn the memory tool on or off for every built-in role.</summary>
        public void SetMemoryToolForAll(bool enabled)
        {
            lock (_lock)
            {
                foreach (string role in BuiltInRoleIds)
                {
                    ConfigureRole(role, useMemoryTool: enabled);
                }
            }
        }

        /// <summary>Chat history on/off, its token budget (0 = the model's), persistence and window for a role (the design note's form).</summary>
        public void ConfigureChatHistory(string roleId, bool enabled, int contextWindowTokens = 0, bool persist = false, int maxMessages = DefaultMaxChatHistoryMessages)
        {
            ConfigureRole(roleId, withChatHistory: enabled, contextTokens: contextWindowTokens, persistChatHistory: persist, maxChatHistoryMessages: maxMessages);
        }

        /// <summary>Per-role switch of the LLM-assisted fold (the runtime's global switch still applies).</summary>
        public void ConfigureLlmContextCompaction(string roleId, bool enabled)
        {
            ConfigureRole(roleId, useLlmContextCompaction: enabled);
        }

        /// <summary>The role's default memory action.</summary>
        public void SetDefaultAction(string roleId, MemoryToolAction action)
        {
            ConfigureRole(roleId, defaultAction: action);
        }

        /// <summary>The role's completion cap (0 or null = unlimited, as in the design note).</summary>
        public void SetMaxOutputTokens(string roleId, int? maxOutputTokens)
        {
            Update(roleId, c => c.MaxOutputTokens = maxOutputTokens);
        }

        /// <summary>The role's tool roundtrip limit (null = 20, 0 = unlimited).</summary>
        public void SetMaxToolCallRoundtrips(string roleId, int? roundtrips)
        {
            Update(roleId, c => c.MaxToolCallRoundtrips = roundtrips);
        }

        /// <summary>The role's sampling temperature (null = the backend's).</summary>
        public void SetTemperature(string roleId, double? temperature)
        {
            Update(roleId, c => c.Temperature = temperature);
        }

        /// <summary>The memory document size limit (null = 16000, 0 = unlimited).</summary>
        public void SetMaxMemoryChars(string roleId, int? maxMemoryChars)
        {
            Update(roleId, c => c.MaxMemoryChars = maxMemoryChars);
        }

        /// <summary>The role's system prompt.</summary>
        public void SetSystemPrompt(string roleId, string systemPrompt)
        {
            Update(roleId, c => c.SystemPrompt = systemPrompt ?? "");
        }

        /// <summary>Roles changed after the given stamps (role id -> revision last pushed), with their revision.</summary>
        internal List<KeyValuePair<RoleMemoryConfig, long>> ChangedSince(IDictionary<string, long> pushed, string onlyRole)
        {
            var changed = new List<KeyValuePair<RoleMemoryConfig, long>>();
            lock (_lock)
            {
                foreach (KeyValuePair<string, long> entry in _changedAt)
                {
                    if (onlyRole != null && entry.Key != onlyRole)
                    {
                        continue;
                    }
                    long last;
                    if (!pushed.TryGetValue(entry.Key, out last) || last < entry.Value)
                    {
                        changed.Add(new KeyValuePair<RoleMemoryConfig, long>(_roles[entry.Key].Clone(), entry.Value));
                    }
                }
            }
            return changed;
        }

        /// <summary>The trimmed role id; a blank one is an error.</summary>
        public static string NormalizeRoleId(string roleId)
        {
            string role = (roleId ?? "").Trim();
            if (role.Length == 0)
            {
                throw new ArgumentException("roleId is required and must not be blank", "roleId");
            }
            return role;
        }

        private RoleMemoryConfig Update(string roleId, Action<RoleMemoryConfig> change)
        {
            string role = NormalizeRoleId(roleId);
            lock (_lock)
            {
                // Changes are applied to a copy and validated before anything is stored: bad input changes nothing.
                RoleMemoryConfig updated = GetConfig(role);
                change(updated);
                updated.Validate();
                Store(updated);
                return updated.Clone();
            }
        }

        private void Store(RoleMemoryConfig config)
        {
            _revision++;
            _roles[config.RoleId] = config;
            _changedAt[config.RoleId] = _revision;
        }

        private static IEnumerable<RoleMemoryConfig> BuiltInRoles()
        {
            yield return new RoleMemoryConfig("Creator") { MaxToolCallRoundtrips = 0 };
            yield return new RoleMemoryConfig("Builder");
            yield return new RoleMemoryConfig("Analyzer");
            yield return new RoleMemoryConfig("Programmer")
            {
                WithChatHistory = false,
                ToolResultMemory = ToolResultMemory.Full,
                UseLlmContextCompaction = false,
                MaxToolCallRoundtrips = 0,
            };
            yield return new RoleMemoryConfig("CoreMechanicAI") { ToolResultMemory = ToolResultMemory.Full };
            yield return new RoleMemoryConfig("AINpc");
            yield return new RoleMemoryConfig("PlainChat") { UseMemoryTool = false, PersistChatHistory = true };
            yield return new RoleMemoryConfig("SmartChat") { PersistChatHistory = true };
            yield return new RoleMemoryConfig("Merchant");
        }
    }
}
