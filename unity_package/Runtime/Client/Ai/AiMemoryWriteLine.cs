using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>One line a memory write stored.</summary>
    public sealed class AiMemoryWriteLine
    {
        /// <summary>The line now in memory.</summary>
        public string Stored { get; set; } = "";

        /// <summary>The line it replaced ("" when it was appended).</summary>
        public string Replaced { get; set; } = "";
    }
}
