namespace CoreAI.Ai
{
    /// <summary>What of a turn's tool results is recorded into the chat history.</summary>
    public enum ToolResultMemory
    {
        None,
        ErrorsOnly,
        CompactSummary,
        Full,
    }
}
