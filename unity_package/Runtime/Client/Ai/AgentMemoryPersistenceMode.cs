namespace CoreAI.Ai
{
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
