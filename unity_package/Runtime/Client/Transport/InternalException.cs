using System;

namespace CoreAI.Runtime
{
    /// <summary>The runtime failed internally (a bug or a broken response).</summary>
    public sealed class InternalException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public InternalException(string message, Exception inner = null) : base(ConnectCode.Internal, message, inner) { }
    }
}
