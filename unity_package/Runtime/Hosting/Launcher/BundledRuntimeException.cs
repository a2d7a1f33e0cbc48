using System;

namespace CoreAI.Launcher
{
    /// <summary>A player build cannot carry the runtime: the message says which folder or file is missing.</summary>
    public sealed class BundledRuntimeException : Exception
    {
        /// <summary>An error with `message`.</summary>
        public BundledRuntimeException(string message) : base(message)
        {
        }
    }
}
