using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>One turn of a role (the design note's AiTaskRequest; contract §7).</summary>
    public sealed class AiTaskRequest
    {
        /// <summary>The role; blank runs as Creator.</summary>
        public string RoleId { get; set; } = "";

        /// <summary>The user payload.</summary>
        public string Hint { get; set; } = "";

        /// <summary>"Chat" borrows short-term history for a role without it, for this request only.</summary>
        public string SourceTag { get; set; } = "";

        /// <summary>Correlates logs and the result.</summary>
        public string TraceId { get; set; } = "";

        /// <summary>The scope (null: the orchestrator's scope provider).</summary>
        public AgentMemoryScope Scope { get; set; }

        /// <summary>A named actor (an NPC instance, a player character); null or "local" for none.</summary>
        public string Actor { get; set; }

        /// <summary>Extra instructions for this request only (sent in the tail, never in the cached prefix).</summary>
        public string RequestSystemInstructions { get; set; } = "";

        /// <summary>Tools offered (null: all; empty: none).</summary>
        public IList<string> AllowedToolNames { get; set; }

        /// <summary>Whether the model must call a tool (the design note's enum); <see cref="ForcedToolName"/> wins when set.</summary>
        public ForcedToolMode ForcedToolMode { get; set; } = ForcedToolMode.Auto;

        /// <summary>The one tool the model must call (e.g. "memory"); "" leaves it to <see cref="ForcedToolMode"/>.</summary>
        public string ForcedToolName { get; set; } = "";

        /// <summary>Completion cap for this request (null: the role's).</summary>
        public int? MaxOutputTokens { get; set; }

        /// <summary>World state sent in the tail.</summary>
        public string WorldState { get; set; } = "";

        /// <summary>Sampling temperature for this request (null: the role's).</summary>
        public double? Temperature { get; set; }

        /// <summary>How long the runtime may take (null: the orchestrator's DefaultTurnTimeout).</summary>
        public TimeSpan? Timeout { get; set; }

        /// <summary>How long one game-tool call may take before the model is told it timed out (null: the runtime's 30 s).</summary>
        public TimeSpan? ClientToolTimeout { get; set; }

        /// <summary>Wait for this turn's memory write (small models write memory after the reply): the turn's task
        /// completes once it landed, with it in <see cref="AiTaskResult.MemoryWrite"/>; a streamed reply still arrives
        /// as it is generated. False (default): the task completes with the reply and
        /// <see cref="AiTaskResult.MemoryWritePending"/> says whether a write is still to come.</summary>
        public bool WaitForMemoryWrite { get; set; }
    }

    /// <summary>Whether the model must call a tool in a turn.</summary>
    public enum ForcedToolMode
    {
        /// <summary>The model decides.</summary>
        Auto,

        /// <summary>No tool is offered for this request.</summary>
        None,

        /// <summary>The model must call one of the offered tools.</summary>
        Required,
    }

    /// <summary>A turn that ran but did not produce a reply (model error, timeout on the runtime); thrown by the string-returning RunTaskAsync.</summary>
    public sealed class AiTaskFailedException : Exception
    {
        /// <summary>A failure carrying the turn's result.</summary>
        public AiTaskFailedException(AiTaskResult result)
            : base("the turn " + result.Status + ": " + result.Error)
        {
            Result = result;
        }

        /// <summary>The whole outcome (status, error, trace id, tool calls).</summary>
        public AiTaskResult Result { get; }
    }

    /// <summary>How a turn ended.</summary>
    public enum AiTaskStatus
    {
        Ok,
        Failed,
        TimedOut,
        Cancelled,
        ToolLoopEnded,
    }

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

    /// <summary>The outcome of a turn.</summary>
    public sealed class AiTaskResult
    {
        /// <summary>How the turn ended.</summary>
        public AiTaskStatus Status { get; set; }

        /// <summary>True when Status is Ok.</summary>
        public bool Succeeded => Status == AiTaskStatus.Ok;

        /// <summary>The visible reply (think blocks stripped).</summary>
        public string Text { get; set; } = "";

        /// <summary>Why the turn did not succeed.</summary>
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

    /// <summary>One line a memory write stored.</summary>
    public sealed class AiMemoryWriteLine
    {
        /// <summary>The line now in memory.</summary>
        public string Stored { get; set; } = "";

        /// <summary>The line it replaced ("" when it was appended).</summary>
        public string Replaced { get; set; } = "";
    }

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
