using System;

namespace CoreAI.Runtime
{
    /// <summary>The runtime cancelled the call. A cancelled CancellationToken raises OperationCanceledException instead.</summary>
    public sealed class CanceledException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public CanceledException(string message, Exception inner = null) : base(ConnectCode.Canceled, message, inner) { }
    }
}
