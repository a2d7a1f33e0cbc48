using System;

namespace CoreAI.Runtime
{
    /// <summary>The Connect error codes (https://connectrpc.com/docs/protocol#error-codes).</summary>
    public enum ConnectCode
    {
        Canceled = 1,
        Unknown = 2,
        InvalidArgument = 3,
        DeadlineExceeded = 4,
        NotFound = 5,
        AlreadyExists = 6,
        PermissionDenied = 7,
        ResourceExhausted = 8,
        FailedPrecondition = 9,
        Aborted = 10,
        OutOfRange = 11,
        Unimplemented = 12,
        Internal = 13,
        Unavailable = 14,
        DataLoss = 15,
        Unauthenticated = 16,
    }

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
    }

    /// <summary>The request was malformed (blank role, bad argument); nothing was changed.</summary>
    public sealed class InvalidArgumentException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public InvalidArgumentException(string message, Exception inner = null) : base(ConnectCode.InvalidArgument, message, inner) { }
    }

    /// <summary>The key, version or role asked for does not exist.</summary>
    public sealed class NotFoundException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public NotFoundException(string message, Exception inner = null) : base(ConnectCode.NotFound, message, inner) { }
    }

    /// <summary>The state does not allow the call (e.g. an unreadable memory document).</summary>
    public sealed class FailedPreconditionException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public FailedPreconditionException(string message, Exception inner = null) : base(ConnectCode.FailedPrecondition, message, inner) { }
    }

    /// <summary>The token is missing or wrong.</summary>
    public sealed class UnauthenticatedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnauthenticatedException(string message, Exception inner = null) : base(ConnectCode.Unauthenticated, message, inner) { }
    }

    /// <summary>The caller is not allowed (e.g. a refused Host or Origin).</summary>
    public sealed class PermissionDeniedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public PermissionDeniedException(string message, Exception inner = null) : base(ConnectCode.PermissionDenied, message, inner) { }
    }

    /// <summary>A limit was hit (MaxMemoryChars, the context, a queue).</summary>
    public sealed class ResourceExhaustedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public ResourceExhaustedException(string message, Exception inner = null) : base(ConnectCode.ResourceExhausted, message, inner) { }
    }

    /// <summary>The runtime cannot be reached or is not ready; retrying later may work.</summary>
    public class UnavailableException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnavailableException(string message, Exception inner = null) : base(ConnectCode.Unavailable, message, inner) { }
    }

    /// <summary>
    /// The runtime restarted with a new token while this call was on its way: the call did not run; the client
    /// already uses the new token, so retrying it works. An UnavailableException, so existing retry code applies.
    /// </summary>
    public sealed class RuntimeRestartedException : UnavailableException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public RuntimeRestartedException(string message, Exception inner = null) : base(message, inner) { }
    }

    /// <summary>The call ran past its timeout (client- or runtime-side).</summary>
    public sealed class DeadlineExceededException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public DeadlineExceededException(string message, Exception inner = null) : base(ConnectCode.DeadlineExceeded, message, inner) { }
    }

    /// <summary>The runtime cancelled the call. A cancelled CancellationToken raises OperationCanceledException instead.</summary>
    public sealed class CanceledException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public CanceledException(string message, Exception inner = null) : base(ConnectCode.Canceled, message, inner) { }
    }

    /// <summary>The runtime failed internally (a bug or a broken response).</summary>
    public sealed class InternalException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public InternalException(string message, Exception inner = null) : base(ConnectCode.Internal, message, inner) { }
    }

    /// <summary>The runtime does not implement the call (an older runtime).</summary>
    public sealed class UnimplementedException : CoreAIRuntimeException
    {
        /// <summary>See <see cref="CoreAIRuntimeException"/>.</summary>
        public UnimplementedException(string message, Exception inner = null) : base(ConnectCode.Unimplemented, message, inner) { }
    }
}
