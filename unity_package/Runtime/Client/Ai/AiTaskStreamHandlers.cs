using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>Callbacks of a streamed turn; they run in order on the caller's SynchronizationContext (Unity's main thread) unless opted out.</summary>
    public sealed class AiTaskStreamHandlers
    {
        /// <summary>True (default): run on the context current when the stream started; false: on the reading thread (background consumers).</summary>
        public bool RunOnCallerContext { get; set; } = true;

        /// <summary>Each piece of visible text as it arrives (a typewriter effect).</summary>
        public Action<string> OnTextDelta { get; set; }

        /// <summary>A tool call as the model makes it.</summary>
        public Action<AiToolCall> OnToolCall { get; set; }

        /// <summary>A tool call's result.</summary>
        public Action<AiToolResult> OnToolResult { get; set; }

        /// <summary>The history cut report of the turn.</summary>
        public Action<V1.CutReport> OnCutReport { get; set; }

        /// <summary>The turn's memory write, after the reply (only with <see cref="AiTaskRequest.WaitForMemoryWrite"/>).</summary>
        public Action<AiMemoryWrite> OnMemoryWrite { get; set; }
    }
}
