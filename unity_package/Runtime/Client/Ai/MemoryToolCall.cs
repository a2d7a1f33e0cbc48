namespace CoreAI.Ai
{
    /// <summary>One <c>memory</c> tool call, as the model would make it.</summary>
    public sealed class MemoryToolCall
    {
        /// <summary>read, write, append, clear, str_replace, insert, delete, rename.</summary>
        public string Action { get; set; } = "";

        /// <summary>Text to write / append / insert.</summary>
        public string Content { get; set; }

        /// <summary>Exact text to replace / delete, or the label to rename.</summary>
        public string OldText { get; set; }

        /// <summary>Replacement text / new label.</summary>
        public string NewText { get; set; }

        /// <summary>Insert after the first line containing this.</summary>
        public string Anchor { get; set; }

        /// <summary>Insert before this 1-based line (wins over Anchor).</summary>
        public int? Line { get; set; }

        /// <summary>Replace / delete every match.</summary>
        public bool? ReplaceAll { get; set; }

        /// <summary>{"action":"read"}.</summary>
        public static MemoryToolCall Read() { return new MemoryToolCall { Action = "read" }; }

        /// <summary>{"action":"write","content":…}.</summary>
        public static MemoryToolCall Write(string content) { return new MemoryToolCall { Action = "write", Content = content }; }

        /// <summary>{"action":"append","content":…}.</summary>
        public static MemoryToolCall Append(string content) { return new MemoryToolCall { Action = "append", Content = content }; }

        /// <summary>{"action":"clear"} (versioned, revertible).</summary>
        public static MemoryToolCall Clear() { return new MemoryToolCall { Action = "clear" }; }

        /// <summary>{"action":"str_replace","old_text":…,"new_text":…}.</summary>
        public static MemoryToolCall StrReplace(string oldText, string newText, bool replaceAll = false)
        {
            return new MemoryToolCall { Action = "str_replace", OldText = oldText, NewText = newText, ReplaceAll = replaceAll ? true : (bool?)null };
        }

        /// <summary>{"action":"insert","content":…} after anchor, or before line, or at the end.</summary>
        public static MemoryToolCall Insert(string content, string anchor = null, int? line = null)
        {
            return new MemoryToolCall { Action = "insert", Content = content, Anchor = anchor, Line = line };
        }

        /// <summary>{"action":"delete","old_text":…}.</summary>
        public static MemoryToolCall Delete(string oldText, bool replaceAll = false)
        {
            return new MemoryToolCall { Action = "delete", OldText = oldText, ReplaceAll = replaceAll ? true : (bool?)null };
        }

        /// <summary>{"action":"rename","old_text":…,"new_text":…}.</summary>
        public static MemoryToolCall Rename(string oldLabel, string newLabel)
        {
            return new MemoryToolCall { Action = "rename", OldText = oldLabel, NewText = newLabel };
        }
    }
}
