using System;

namespace CoreAI.Runtime
{
    /// <summary>A limit was hit (MaxMemoryChars, the context, a queue).</summary>
    public sealed class ResourceExhaustedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public ResourceExhaustedException(string message, Exception inner = null) : base(ConnectCode.ResourceExhausted, message, inner) { }
    }
}
