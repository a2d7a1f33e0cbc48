using System;

namespace CoreAI.Runtime
{
    /// <summary>A call to the CoreAI runtime failed; <see cref="Code"/> says how, the message says why.</summary>
    public class CoreAIRuntimeException : Exception
    {
        /// <summary>An error with its Connect code and the runtime's message.</summary>
        public CoreAIRuntimeException(ConnectCode code, string message, Exception inner = null)
            : base(message, inner)
        {
            Code = code;
        }

        /// <summary>The Connect error code.</summary>
        public ConnectCode Code { get; }

        /// <summary>The code as it travels on the wire, e.g. "invalid_argument".</summary>
        public string CodeName => ConnectErrors.WireName(Code);

        /// <summary>How long the runtime asks the caller to wait before trying again (its <c>google.rpc.RetryInfo</c>
        /// detail: a turn it cannot take now carries one); null when it gave no hint.</summary>
        public TimeSpan? RetryAfter { get; internal set; }
    }
}
