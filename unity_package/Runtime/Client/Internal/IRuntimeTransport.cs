using System;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Runtime
{
    /// <summary>
    /// How the generated service clients reach a runtime: one unary call or one server stream per method, by service
    /// and method name. <see cref="ConnectClient"/> is the real one (HTTP/1.1 + JSON); tests give a
    /// <see cref="CoreAIRuntimeClient"/> a fake one, so the API above it runs without a socket.
    /// </summary>
    internal interface IRuntimeTransport : IDisposable
    {
        /// <summary>Where calls go (for messages and diagnostics).</summary>
        string BaseUrl { get; }

        /// <summary>Cancelled when the transport is disposed or its game stops; every call ends with it.</summary>
        CancellationToken Lifetime { get; }

        /// <summary>One unary call.</summary>
        Task<TResponse> UnaryAsync<TRequest, TResponse>(string service, string method, TRequest request, CallOptions options,
            CancellationToken cancellationToken) where TResponse : new();

        /// <summary>One server-streaming call; onMessage runs for every message, in order.</summary>
        Task ServerStreamAsync<TRequest, TResponse>(string service, string method, TRequest request, Action<TResponse> onMessage,
            CallOptions options, CancellationToken cancellationToken) where TResponse : new();
    }
}
