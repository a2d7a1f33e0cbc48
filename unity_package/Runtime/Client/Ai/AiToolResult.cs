using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>The result of a tool call during a turn.</summary>
    public sealed class AiToolResult
    {
        /// <summary>The call id.</summary>
        public string CallId { get; set; } = "";

        /// <summary>The tool name.</summary>
        public string Name { get; set; } = "";

        /// <summary>True when the tool succeeded.</summary>
        public bool Success { get; set; }

        /// <summary>What the model saw.</summary>
        public string Content { get; set; } = "";
    }
}
