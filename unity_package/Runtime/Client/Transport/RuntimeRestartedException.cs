using System;

namespace CoreAI.Runtime
{
    /// <summary>
    /// The runtime restarted with a new token while this call was on its way: the call did not run; the client
    /// already uses the new token, so retrying it works. An UnavailableException, so existing retry code applies.
    /// </summary>
    public sealed class RuntimeRestartedException : UnavailableException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public RuntimeRestartedException(string message, Exception inner = null) : base(message, inner) { }
    }
}
