using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>What one item of a streamed turn carries.</summary>
    public enum AiTaskStreamItemKind
    {
        TextDelta,
        ToolCall,
        ToolResult,
        CutReport,
        MemoryWrite,
    }
}
