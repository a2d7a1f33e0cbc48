using System;

namespace CoreAI.Runtime
{
    /// <summary>The request was malformed (blank role, bad argument); nothing was changed.</summary>
    public sealed class InvalidArgumentException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public InvalidArgumentException(string message, Exception inner = null) : base(ConnectCode.InvalidArgument, message, inner) { }
    }
}
