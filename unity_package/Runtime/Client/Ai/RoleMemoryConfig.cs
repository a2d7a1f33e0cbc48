using System;
using System.Collections.Generic;

namespace CoreAI.Ai
{
    /// <summary>How one role uses the memory tool, chat history and compaction (contract §6).</summary>
    public sealed class RoleMemoryConfig
    {
        /// <summary>A role with the defaults: memory tool on (Append), history on (30 messages, not persisted).</summary>
        public RoleMemoryConfig(string roleId)
        {
            RoleId = AgentMemoryPolicy.NormalizeRoleId(roleId);
        }

        /// <summary>The trimmed role id.</summary>
        public string RoleId { get; }

        /// <summary>Whether the model gets the memory tool.</summary>
        public bool UseMemoryTool { get; set; } = true;

        /// <summary>The action shown to the model as the default.</summary>
        public MemoryToolAction DefaultAction { get; set; } = MemoryToolAction.Append;

        /// <summary>Whether recent dialogue is sent with each request.</summary>
        public bool WithChatHistory { get; set; } = true;

        /// <summary>Whether the chat history reaches disk (survives a restart).</summary>
        public bool PersistChatHistory { get; set; }

        /// <summary>Window of stored messages read per request.</summary>
        public int MaxChatHistoryMessages { get; set; } = AgentMemoryPolicy.DefaultMaxChatHistoryMessages;

        /// <summary>The role's context size in tokens (0 = the model's).</summary>
        public int ContextTokens { get; set; }

        /// <summary>Completion cap (null = none; setting 0 means unlimited too and reads back as null).</summary>
        public int? MaxOutputTokens
        {
            get { return _maxOutputTokens; }
            set { _maxOutputTokens = value == 0 ? null : value; }
        }

        private int? _maxOutputTokens;

        /// <summary>Tool roundtrip limit (null = 20, 0 = unlimited).</summary>
        public int? MaxToolCallRoundtrips { get; set; }

        /// <summary>What of the tool results is recorded into the history.</summary>
        public ToolResultMemory ToolResultMemory { get; set; } = ToolResultMemory.CompactSummary;

        /// <summary>Sampling temperature (null = the backend's).</summary>
        public double? Temperature { get; set; }

        /// <summary>Per-role switch of the LLM-assisted fold.</summary>
        public bool UseLlmContextCompaction { get; set; } = true;

        /// <summary>History-budget fraction that triggers compaction (null or invalid = 0.8).</summary>
        public double? CompactionTriggerRatio { get; set; }

        /// <summary>Memory document size limit (null = 16000, 0 = unlimited).</summary>
        public int? MaxMemoryChars { get; set; }

        /// <summary>The role's system prompt ("" = the runtime's built-in prompt).</summary>
        public string SystemPrompt { get; set; } = "";

        /// <summary>The saved history of earlier sessions in the prompt: null = the runtime decides (left out for a
        /// small model with memory on, which recalls better from its memory alone), true = sent, false = left out.</summary>
        public bool? SendEarlierSessions { get; set; }

        /// <summary>An independent copy.</summary>
        public RoleMemoryConfig Clone()
        {
            return (RoleMemoryConfig)MemberwiseClone();
        }

        /// <summary>A copy under another role id.</summary>
        public RoleMemoryConfig CloneAs(string roleId)
        {
            RoleMemoryConfig copy = new RoleMemoryConfig(roleId);
            copy.UseMemoryTool = UseMemoryTool;
            copy.DefaultAction = DefaultAction;
            copy.WithChatHistory = WithChatHistory;
            copy.PersistChatHistory = PersistChatHistory;
            copy.MaxChatHistoryMessages = MaxChatHistoryMessages;
            copy.ContextTokens = ContextTokens;
            copy.MaxOutputTokens = MaxOutputTokens;
            copy.MaxToolCallRoundtrips = MaxToolCallRoundtrips;
            copy.ToolResultMemory = ToolResultMemory;
            copy.Temperature = Temperature;
            copy.UseLlmContextCompaction = UseLlmContextCompaction;
            copy.CompactionTriggerRatio = CompactionTriggerRatio;
            copy.MaxMemoryChars = MaxMemoryChars;
            copy.SystemPrompt = SystemPrompt;
            copy.SendEarlierSessions = SendEarlierSessions;
            return copy;
        }

        /// <summary>Throws ArgumentOutOfRangeException naming the first invalid setting.</summary>
        public void Validate()
        {
            if (MaxChatHistoryMessages < 0)
                throw new ArgumentOutOfRangeException("MaxChatHistoryMessages", MaxChatHistoryMessages, "MaxChatHistoryMessages must be >= 0");
            if (ContextTokens < 0)
                throw new ArgumentOutOfRangeException("ContextTokens", ContextTokens, "ContextTokens must be >= 0 (0 = the model's)");
            if (MaxOutputTokens.HasValue && MaxOutputTokens.Value < 1)
                throw new ArgumentOutOfRangeException("MaxOutputTokens", MaxOutputTokens, "MaxOutputTokens must be >= 0 (0 = unlimited)");
            if (MaxToolCallRoundtrips.HasValue && MaxToolCallRoundtrips.Value < 0)
                throw new ArgumentOutOfRangeException("MaxToolCallRoundtrips", MaxToolCallRoundtrips, "MaxToolCallRoundtrips must be >= 0 (0 = unlimited)");
            if (MaxMemoryChars.HasValue && MaxMemoryChars.Value < 0)
                throw new ArgumentOutOfRangeException("MaxMemoryChars", MaxMemoryChars, "MaxMemoryChars must be >= 0 (0 = unlimited)");
            if (Temperature.HasValue && (double.IsNaN(Temperature.Value) || Temperature.Value < 0))
                throw new ArgumentOutOfRangeException("Temperature", Temperature, "Temperature must be a non-negative number");
            if (CompactionTriggerRatio.HasValue && double.IsNaN(CompactionTriggerRatio.Value))
                throw new ArgumentOutOfRangeException("CompactionTriggerRatio", CompactionTriggerRatio, "CompactionTriggerRatio must be a number");
            if (SystemPrompt == null)
                throw new ArgumentNullException("SystemPrompt");
        }
    }
}
