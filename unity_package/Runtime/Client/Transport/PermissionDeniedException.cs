using System;

namespace CoreAI.Runtime
{
    /// <summary>The caller is not allowed (e.g. a refused Host or Origin).</summary>
    public sealed class PermissionDeniedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public PermissionDeniedException(string message, Exception inner = null) : base(ConnectCode.PermissionDenied, message, inner) { }
    }
}
