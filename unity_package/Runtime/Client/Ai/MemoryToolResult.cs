namespace CoreAI.Ai
{
    /// <summary>The result of a memory tool call, as the model sees it.</summary>
    public sealed class MemoryToolResult
    {
        /// <summary>True when the call succeeded (the message then starts with "DONE:").</summary>
        public bool Success { get; set; }

        /// <summary>The success message.</summary>
        public string Message { get; set; } = "";

        /// <summary>Why the call failed (names the argument).</summary>
        public string Error { get; set; } = "";

        /// <summary>The newest version after the call.</summary>
        public int Version { get; set; }

        /// <summary>Length of the document after the call.</summary>
        public int MemoryLength { get; set; }

        /// <summary>The document (read returns it), else null.</summary>
        public string Memory { get; set; }

        /// <summary>The exact compact JSON the model sees.</summary>
        public string ResultJson { get; set; } = "";
    }
}
