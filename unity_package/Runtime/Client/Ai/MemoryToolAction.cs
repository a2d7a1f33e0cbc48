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
}
