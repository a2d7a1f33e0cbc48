using System.Collections.Generic;

namespace CoreAI.Ai
{
    /// <summary>The memory document of one key with its retained versions (contract §2).</summary>
    public sealed class AgentMemoryState
    {
        /// <summary>Versions kept when MaxMemoryVersions is below 1.</summary>
        public const int DefaultMaxMemoryVersions = 30;

        /// <summary>The canonical memory document.</summary>
        public string Memory { get; set; } = "";

        /// <summary>The system prompt last sent for this key.</summary>
        public string LastSystemPrompt { get; set; } = "";

        /// <summary>The memory as first sent to the model (kept byte-identical for the prompt cache).</summary>
        public string SystemPromptMemorySnapshot { get; set; } = "";

        /// <summary>The version of that snapshot.</summary>
        public int SystemPromptMemoryVersion { get; set; }

        /// <summary>How many versions are kept.</summary>
        public int MaxMemoryVersions { get; set; } = DefaultMaxMemoryVersions;

        /// <summary>Retained versions, oldest first.</summary>
        public List<AgentMemoryVersion> Versions { get; set; } = new List<AgentMemoryVersion>();
    }
}
