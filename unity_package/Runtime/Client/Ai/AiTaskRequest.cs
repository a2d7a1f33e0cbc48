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
}
