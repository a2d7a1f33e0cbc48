using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
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
}
