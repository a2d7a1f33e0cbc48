using System;

namespace CoreAI.Runtime
{
    /// <summary>The key, version or role asked for does not exist.</summary>
    public sealed class NotFoundException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public NotFoundException(string message, Exception inner = null) : base(ConnectCode.NotFound, message, inner) { }
    }
}
