using System;

namespace CoreAI.Runtime
{
    /// <summary>The token is missing or wrong.</summary>
    public sealed class UnauthenticatedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnauthenticatedException(string message, Exception inner = null) : base(ConnectCode.Unauthenticated, message, inner) { }
    }
}
