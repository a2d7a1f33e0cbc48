using System;

namespace CoreAI.Runtime
{
    /// <summary>The state does not allow the call (e.g. an unreadable memory document).</summary>
    public sealed class FailedPreconditionException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public FailedPreconditionException(string message, Exception inner = null) : base(ConnectCode.FailedPrecondition, message, inner) { }
    }
}
