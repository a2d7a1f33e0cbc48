using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>The outcome of a turn.</summary>
    public sealed class AiTaskResult
    {
        /// <summary>How the turn ended.</summary>
        public AiTaskStatus Status { get; set; }

        /// <summary>True when Status is Ok.</summary>
        public bool Succeeded => Status == AiTaskStatus.Ok;

        /// <summary>True when the turn produced its reply: Ok, or a tool loop that ended (its reply is the model's
        /// closing words, or the loop's reason when it said nothing; <see cref="Error"/> says why the loop ended).
        /// What an NPC shows the player.</summary>
        public bool Completed => Status == AiTaskStatus.Ok || Status == AiTaskStatus.ToolLoopEnded;

        /// <summary>The visible reply (think blocks stripped).</summary>
        public string Text { get; set; } = "";

        /// <summary>Why the turn did not succeed (or, when Status is ToolLoopEnded, why its tool loop ended).</summary>
        public string Error { get; set; } = "";

        /// <summary>The trace id of the turn.</summary>
        public string TraceId { get; set; } = "";

        /// <summary>Tool calls in order.</summary>
        public List<AiToolCall> ToolCalls { get; } = new List<AiToolCall>();

        /// <summary>Tool results in order.</summary>
        public List<AiToolResult> ToolResults { get; } = new List<AiToolResult>();

        /// <summary>What of the stored history did not reach the model verbatim.</summary>
        public V1.CutReport CutReport { get; set; }

        /// <summary>Token counts and model calls.</summary>
        public V1.TurnUsage Usage { get; set; }

        /// <summary>True when the turn's memory write had not landed when the turn returned: it lands after the reply
        /// (see <see cref="AiOrchestrator.WaitForMemoryWriteAsync"/> and <see cref="AiOrchestrator.MemoryChanged"/>).</summary>
        public bool MemoryWritePending { get; set; }

        /// <summary>The turn's memory write, when the turn waited for it (<see cref="AiTaskRequest.WaitForMemoryWrite"/>); else null.</summary>
        public AiMemoryWrite MemoryWrite { get; set; }

        /// <summary>The conversation the turn ran in (role, scope, actor as sent), for waiting on its memory writes.</summary>
        internal V1.AgentTarget Target { get; set; }
    }
}
