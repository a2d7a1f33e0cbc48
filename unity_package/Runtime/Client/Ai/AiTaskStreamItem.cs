using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>One item of a streamed turn.</summary>
    public sealed class AiTaskStreamItem
    {
        /// <summary>Which of the fields below is set.</summary>
        public AiTaskStreamItemKind Kind { get; internal set; }

        /// <summary>A piece of visible text (TextDelta).</summary>
        public string Text { get; internal set; } = "";

        /// <summary>A tool call (ToolCall).</summary>
        public AiToolCall ToolCall { get; internal set; }

        /// <summary>A tool result (ToolResult).</summary>
        public AiToolResult ToolResult { get; internal set; }

        /// <summary>The history cut report (CutReport).</summary>
        public V1.CutReport CutReport { get; internal set; }

        /// <summary>The turn's memory write, after the reply (MemoryWrite; only with AiTaskRequest.WaitForMemoryWrite).</summary>
        public AiMemoryWrite MemoryWrite { get; internal set; }
    }
}
