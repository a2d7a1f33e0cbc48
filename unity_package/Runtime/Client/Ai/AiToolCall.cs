using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>A tool call the model made during a turn.</summary>
    public sealed class AiToolCall
    {
        /// <summary>The call id.</summary>
        public string CallId { get; set; } = "";

        /// <summary>The tool name, e.g. "memory".</summary>
        public string Name { get; set; } = "";

        /// <summary>The arguments as the model produced them.</summary>
        public string ArgumentsJson { get; set; } = "";
    }
}
