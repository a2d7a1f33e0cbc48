using System;

namespace CoreAI.Runtime
{
    /// <summary>The runtime cannot be reached or is not ready; retrying later may work.</summary>
    public class UnavailableException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnavailableException(string message, Exception inner = null) : base(ConnectCode.Unavailable, message, inner) { }
    }
}
