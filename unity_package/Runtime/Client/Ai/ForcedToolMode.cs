using System;
using System.Collections.Generic;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
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
}
