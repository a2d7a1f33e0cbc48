using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>How a turn ended.</summary>
    public enum AiTaskStatus
    {
        Ok,
        Failed,
        TimedOut,
        Cancelled,
        ToolLoopEnded,
    }
}
