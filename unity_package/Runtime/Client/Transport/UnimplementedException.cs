using System;

namespace CoreAI.Runtime
{
    /// <summary>The runtime does not implement the call (an older runtime).</summary>
    public sealed class UnimplementedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnimplementedException(string message, Exception inner = null) : base(ConnectCode.Unimplemented, message, inner) { }
    }
}
