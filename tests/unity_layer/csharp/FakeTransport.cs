// A transport that answers from a script instead of a socket: the client API (policy sync, scopes, turns, errors) runs
// exactly as against a runtime, and the test reads back what would have been sent.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>One call the client made: the method and its request as proto3 JSON.</summary>
    public sealed class FakeCall
    {
        internal FakeCall(string method, string request)
        {
            Method = method;
            Request = request;
        }

        /// <summary>The RPC's name (RunTask, ConfigureRole …).</summary>
        public string Method { get; private set; }

        /// <summary>The request, as the Connect transport would have sent it.</summary>
        public string Request { get; private set; }
    }

    /// <summary>IRuntimeTransport over scripted answers (proto3 JSON per method; unscripted methods answer an empty message).</summary>
    public sealed class FakeTransport : IRuntimeTransport
    {
        private readonly Dictionary<string, string> answers = new Dictionary<string, string>();
        private readonly List<FakeCall> calls = new List<FakeCall>();
        private readonly CancellationTokenSource lifetime = new CancellationTokenSource();

        /// <summary>The calls made so far, oldest first.</summary>
        public FakeCall[] Calls
        {
            get { lock (calls) return calls.ToArray(); }
        }

        /// <summary>Answer every call of `method` with `responseJson`.</summary>
        public void Answer(string method, string responseJson)
        {
            lock (answers) answers[method] = responseJson;
        }

        /// <summary>A client of the package over this transport; `defaultScope` plays a virtual player's GameHost scope.</summary>
        public CoreAIRuntimeClient Client(AgentMemoryPolicy policy, AgentMemoryScope defaultScope)
        {
            return new CoreAIRuntimeClient(this, new GameHost { DefaultScope = defaultScope }, policy);
        }

        string IRuntimeTransport.BaseUrl => "fake://no-socket";

        CancellationToken IRuntimeTransport.Lifetime => lifetime.Token;

        Task<TResponse> IRuntimeTransport.UnaryAsync<TRequest, TResponse>(string service, string method, TRequest request, CallOptions options,
            CancellationToken cancellationToken)
        {
            lock (calls) calls.Add(new FakeCall(method, ProtoJson.Serialize(request)));
            string answer;
            lock (answers) answers.TryGetValue(method, out answer);
            return Task.FromResult(answer == null ? new TResponse() : ProtoJson.Deserialize<TResponse>(answer));
        }

        Task IRuntimeTransport.ServerStreamAsync<TRequest, TResponse>(string service, string method, TRequest request, Action<TResponse> onMessage,
            CallOptions options, CancellationToken cancellationToken)
        {
            lock (calls) calls.Add(new FakeCall(method, ProtoJson.Serialize(request)));
            return Task.CompletedTask;
        }

        void IDisposable.Dispose()
        {
            lifetime.Cancel();
        }
    }
}
