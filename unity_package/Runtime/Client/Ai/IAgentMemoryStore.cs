using System;

namespace CoreAI.Ai
{
    /// <summary>One store contract for the memory tool and chat history (contract §3).</summary>
    public interface IAgentMemoryStore
    {
        /// <summary>True and the state when the role has a memory document; false when it has none.</summary>
        /// <exception cref="CoreAI.Runtime.FailedPreconditionException">The document exists but cannot be read.</exception>
        bool TryLoad(string roleId, out AgentMemoryState state);

        /// <summary>Replace the whole state (heals an unreadable document).</summary>
        void Save(string roleId, AgentMemoryState state);

        /// <summary>Delete the memory document, its versions and snapshot; chat history stays.</summary>
        void Clear(string roleId);

        /// <summary>Append a chat message; persistToDisk false keeps it in the runtime process only.</summary>
        void AppendChatMessage(string roleId, string role, string content, bool persistToDisk = true);

        /// <summary>Oldest first, the newest maxMessages (0 = all).</summary>
        ChatMessage[] GetChatHistory(string roleId, int maxMessages = 0);

        /// <summary>Delete chat history, transcript and rolling summary; memory stays.</summary>
        void ClearChatHistory(string roleId);
    }
}
