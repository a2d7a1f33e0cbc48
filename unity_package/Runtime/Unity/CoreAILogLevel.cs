using System;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>Levels of <see cref="CoreAILog"/>.</summary>
    public enum CoreAILogLevel
    {
        /// <summary>Everything.</summary>
        Info = 0,

        /// <summary>Warnings and errors.</summary>
        Warning = 1,

        /// <summary>Errors only.</summary>
        Error = 2,

        /// <summary>Nothing.</summary>
        Off = 3,
    }
}
