namespace CoreAI.Ai
{
    /// <summary>One retained version of a memory document.</summary>
    public sealed class AgentMemoryVersion
    {
        /// <summary>1, 2, 3 … per key.</summary>
        public int Version { get; set; }

        /// <summary>Unix seconds, UTC.</summary>
        public long Timestamp { get; set; }

        /// <summary>The action that produced it (append, write, revert …).</summary>
        public string Action { get; set; } = "";

        /// <summary>The whole document after the action.</summary>
        public string ContentAfter { get; set; } = "";

        /// <summary>A short size note, e.g. "chars 0->11 (+11)".</summary>
        public string Note { get; set; } = "";
    }
}
