namespace CoreAI.Ai
{
    /// <summary>A role's default memory action, shown to the model in the memory tool's description.</summary>
    public enum MemoryToolAction
    {
        Write,
        Append,
        Clear,
        StrReplace,
        Insert,
        Delete,
        Rename,
    }

    /// <summary>What of a turn's tool results is recorded into the chat history.</summary>
    public enum ToolResultMemory
    {
        None,
        ErrorsOnly,
        CompactSummary,
        Full,
    }

    /// <summary>
    /// Where the runtime keeps memory, chat, transcripts and summaries. Chosen when the runtime process is
    /// started (the launcher passes <c>--session-only</c> for SessionOnly); a client cannot switch it.
    /// </summary>
    public enum AgentMemoryPersistenceMode
    {
        /// <summary>Files under persistentDataPath/CoreAI (the default).</summary>
        Persistent,

        /// <summary>Process memory only; nothing is written to disk.</summary>
        SessionOnly,
    }
}
