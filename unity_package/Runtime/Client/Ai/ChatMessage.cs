namespace CoreAI.Ai
{
    /// <summary>A chat message of the rolling window.</summary>
    public sealed class ChatMessage
    {
        /// <summary>"user", "assistant" …</summary>
        public string Role { get; set; } = "";

        /// <summary>The text.</summary>
        public string Content { get; set; } = "";

        /// <summary>Unix seconds, UTC.</summary>
        public long Timestamp { get; set; }

        /// <summary>Monotonic per key (0 for legacy rows).</summary>
        public long Order { get; set; }
    }
}
