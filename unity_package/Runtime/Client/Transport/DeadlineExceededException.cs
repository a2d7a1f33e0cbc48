using System;

namespace CoreAI.Runtime
{
    /// <summary>The call ran past its timeout (client- or runtime-side).</summary>
    public sealed class DeadlineExceededException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public DeadlineExceededException(string message, Exception inner = null) : base(ConnectCode.DeadlineExceeded, message, inner) { }
    }
}
