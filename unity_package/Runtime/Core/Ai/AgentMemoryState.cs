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
