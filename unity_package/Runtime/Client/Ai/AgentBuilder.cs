using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Ai
{
    /// <summary>Fluent construction of a role's configuration, starting from the defaults.</summary>
    /// <example>
    /// <code>new AgentBuilder("BlacksmithNPC").WithMemory(MemoryToolAction.Append).WithChatHistory(4096, persistBetweenSessions: true).Build();</code>
    /// </example>
    public sealed class AgentBuilder
    {
        private readonly RoleMemoryConfig _config;
        private readonly AgentMemoryPolicy _policy;
        private readonly List<GameTool> _tools = new List<GameTool>();

        /// <summary>A builder whose Build() registers into <see cref="AgentMemoryPolicy.Default"/>.</summary>
        public AgentBuilder(string roleId) : this(roleId, AgentMemoryPolicy.Default)
        {
        }

        /// <summary>A builder whose Build() registers into policy.</summary>
        public AgentBuilder(string roleId, AgentMemoryPolicy policy)
        {
            _config = new RoleMemoryConfig(roleId);
            _policy = policy ?? throw new ArgumentNullException("policy");
        }

        /// <summary>Memory tool on, with this default action.</summary>
        public AgentBuilder WithMemory(MemoryToolAction defaultAction = MemoryToolAction.Append)
        {
            _config.UseMemoryTool = true;
            _config.DefaultAction = defaultAction;
            return this;
        }

        /// <summary>Memory tool off.</summary>
        public AgentBuilder WithoutMemory()
        {
            _config.UseMemoryTool = false;
            return this;
        }

        /// <summary>Chat history on; contextWindowTokens (the design note's name) null or 0 keeps the model's context; persistBetweenSessions writes it to disk.</summary>
        public AgentBuilder WithChatHistory(int? contextWindowTokens = null, bool persistBetweenSessions = false, int maxChatHistoryMessages = AgentMemoryPolicy.DefaultMaxChatHistoryMessages)
        {
            _config.WithChatHistory = true;
            _config.ContextTokens = contextWindowTokens ?? 0;
            _config.PersistChatHistory = persistBetweenSessions;
            _config.MaxChatHistoryMessages = maxChatHistoryMessages;
            return this;
        }

        /// <summary>Chat history off (and so not persisted).</summary>
        public AgentBuilder WithoutChatHistory()
        {
            _config.WithChatHistory = false;
            _config.PersistChatHistory = false;
            return this;
        }

        /// <summary>Per-role switch of the LLM-assisted fold.</summary>
        public AgentBuilder WithLlmContextCompaction(bool enabled = true)
        {
            _config.UseLlmContextCompaction = enabled;
            return this;
        }

        /// <summary>The role's system prompt.</summary>
        public AgentBuilder WithSystemPrompt(string systemPrompt)
        {
            _config.SystemPrompt = systemPrompt ?? "";
            return this;
        }

        /// <summary>The role's sampling temperature.</summary>
        public AgentBuilder WithTemperature(double temperature)
        {
            _config.Temperature = temperature;
            return this;
        }

        /// <summary>The role's completion cap (0 = unlimited).</summary>
        public AgentBuilder WithMaxOutputTokens(int maxOutputTokens)
        {
            _config.MaxOutputTokens = maxOutputTokens;
            return this;
        }

        /// <summary>The role's tool roundtrip limit (0 = unlimited).</summary>
        public AgentBuilder WithMaxToolCallRoundtrips(int roundtrips)
        {
            _config.MaxToolCallRoundtrips = roundtrips;
            return this;
        }

        /// <summary>What of the tool results is recorded into the history.</summary>
        public AgentBuilder WithToolResultMemory(ToolResultMemory mode)
        {
            _config.ToolResultMemory = mode;
            return this;
        }

        /// <summary>The memory document size limit (0 = unlimited).</summary>
        public AgentBuilder WithMaxMemoryChars(int maxMemoryChars)
        {
            _config.MaxMemoryChars = maxMemoryChars;
            return this;
        }

        /// <summary>A game tool the model may call; the handler gets the arguments as TArgs and returns what the model reads.</summary>
        /// <remarks>
        /// The arguments' JSON Schema comes from TArgs' public fields and properties (see <see cref="ToolSchema"/>).
        /// runOnMainThread (default): the handler runs on Unity's main thread (the client's GameHost, else the context of
        /// the call that started the turn), so it may touch the scene; with neither it is refused, never run elsewhere.
        /// An exception is a failed result the model sees. TArgs needs a public parameterless constructor (it is built
        /// with it, so IL2CPP keeps it); mark it [UnityEngine.Scripting.Preserve] so its fields survive stripping too.
        /// </remarks>
        public AgentBuilder WithTool<TArgs>(string name, string description, Func<TArgs, Task<string>> handler, bool runOnMainThread = true)
            where TArgs : new()
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return WithTool<TArgs>(name, description, (args, token) => Wrap(handler(args)), runOnMainThread);
        }

        /// <summary>A game tool whose handler observes the turn's cancellation and reports success or failure itself.</summary>
        public AgentBuilder WithTool<TArgs>(string name, string description, Func<TArgs, CancellationToken, Task<ToolResult>> handler, bool runOnMainThread = true)
            where TArgs : new()
        {
            _tools.Add(GameTool.Create(name, description, handler, runOnMainThread));
            return this;
        }

        private static async Task<ToolResult> Wrap(Task<string> content)
        {
            return ToolResult.Ok(content == null ? "DONE" : await content);
        }

        /// <summary>Validate, register in the policy (which reaches the runtime before the role's next call), return a copy.</summary>
        public AgentConfig Build()
        {
            AgentConfig config = BuildDetached();
            _policy.SetConfig(config.Memory);
            if (_tools.Count > 0)
            {
                _policy.Tools.Set(config.RoleId, _tools);
            }
            return config;
        }

        /// <summary>Validate and return the configuration without registering it anywhere.</summary>
        public AgentConfig BuildDetached()
        {
            RoleMemoryConfig copy = _config.Clone();
            copy.Validate();
            return new AgentConfig(copy);
        }
    }
}
