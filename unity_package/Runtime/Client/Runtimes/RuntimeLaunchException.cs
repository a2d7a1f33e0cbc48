using System;

namespace CoreAI.Launcher
{
    /// <summary>A runtime could not be started; the message says why and what to do.</summary>
    public sealed class RuntimeLaunchException : Exception
    {
        /// <summary>Creates the exception.</summary>
        public RuntimeLaunchException(RuntimeLaunchFailure failure, string message, string logTail = null, Exception inner = null)
            : base(message + (string.IsNullOrEmpty(logTail) ? "" : "\n--- runtime log (last lines) ---\n" + logTail), inner)
        {
            Failure = failure;
            LogTail = logTail ?? "";
        }

        /// <summary>Why the start failed.</summary>
        public RuntimeLaunchFailure Failure { get; private set; }

        /// <summary>The last lines of the runtime's log ("" when none).</summary>
        public string LogTail { get; private set; }
    }
}
