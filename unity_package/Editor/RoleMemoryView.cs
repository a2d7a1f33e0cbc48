using System;
using System.Collections.Generic;
using System.Text.RegularExpressions;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.EditorTools
{
    /// <summary>One role as the inspector shows it: memory document, retained versions, chat history.</summary>
    public sealed class RoleMemoryView
    {
        /// <summary>The role id.</summary>
        public string RoleId { get; internal set; }

        /// <summary>True when the role has a memory document.</summary>
        public bool HasMemory { get; internal set; }

        /// <summary>The memory document ("" when none).</summary>
        public string Memory { get; internal set; }

        /// <summary>Retained versions, oldest first.</summary>
        public IReadOnlyList<AgentMemoryVersion> Versions { get; internal set; }

        /// <summary>Chat history, oldest first.</summary>
        public ChatMessage[] ChatHistory { get; internal set; }
    }
}
