using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>What one turn's memory write did.</summary>
    public sealed class AiMemoryWrite
    {
        /// <summary>The trace id of the turn whose player line it decided on.</summary>
        public string TraceId { get; set; } = "";

        /// <summary>True when the memory document changed.</summary>
        public bool Changed { get; set; }

        /// <summary>The lines stored, in order (empty when nothing changed).</summary>
        public List<AiMemoryWriteLine> Lines { get; } = new List<AiMemoryWriteLine>();

        /// <summary>Why nothing was stored ("" when something was).</summary>
        public string Reason { get; set; } = "";

        /// <summary>The memory version after the write (0 when nothing changed).</summary>
        public int Version { get; set; }

        /// <summary>One line for a log or a player, e.g. "stored: Player's name: Tobin".</summary>
        public string Summary { get; set; } = "";
    }
}
