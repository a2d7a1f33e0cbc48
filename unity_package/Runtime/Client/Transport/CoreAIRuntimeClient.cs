using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.V1;

namespace CoreAI.Runtime
{
    /// <summary>
    /// One connection to a CoreAI runtime: the Connect transport, the generated service clients and the
    /// role policy that is pushed to the runtime. Create one per runtime and share it.
    /// </summary>
    public sealed class CoreAIRuntimeClient : IDisposable
    {
        private readonly IRuntimeTransport _transport;
        private readonly Dictionary<string, long> _pushed = new Dictionary<string, long>(StringComparer.Ordinal);

        /// <summary>A client of the runtime at options.BaseUrl; policy null uses <see cref="AgentMemoryPolicy.Default"/>.</summary>
        public CoreAIRuntimeClient(ConnectClientOptions options, AgentMemoryPolicy policy = null)
            : this(new ConnectClient(options), options.GameHost, policy)
        {
        }

        /// <summary>A client over any transport (tests give it a fake one: no socket); policy null uses the default.</summary>
        internal CoreAIRuntimeClient(IRuntimeTransport transport, GameHost host, AgentMemoryPolicy policy = null)
        {
            _transport = transport ?? throw new ArgumentNullException(nameof(transport));
            GameHost = host;
            Policy = policy ?? AgentMemoryPolicy.Default;
            MemoryStore = new MemoryStoreClient(_transport);
            Orchestrator = new OrchestratorClient(_transport);
        }

        /// <summary>A client of the runtime at baseUrl with its bearer token.</summary>
        public CoreAIRuntimeClient(string baseUrl, string token, AgentMemoryPolicy policy = null)
            : this(new ConnectClientOptions { BaseUrl = baseUrl, Token = token }, policy)
        {
        }

        /// <summary>The role policy pushed to the runtime.</summary>
        public AgentMemoryPolicy Policy { get; }

        /// <summary>The generated MemoryStore client (raw proto DTOs); the package's plumbing, not its API.</summary>
        internal MemoryStoreClient MemoryStore { get; }

        /// <summary>The generated Orchestrator client (raw proto DTOs); the package's plumbing, not its API.</summary>
        internal OrchestratorClient Orchestrator { get; }

        /// <summary>The runtime's base URL.</summary>
        public string BaseUrl => _transport.BaseUrl;

        /// <summary>The game hosting this client (main thread, lifetime, whether game code may run); null outside a game.</summary>
        public GameHost GameHost { get; }

        /// <summary>Cancelled when the client is disposed or its game stops: turns, their callbacks and game tools end with it.</summary>
        public CancellationToken Lifetime => _transport.Lifetime;

        /// <summary>The provider of callers that pass none: the GameHost's default scope, else the empty scope.</summary>
        internal IAgentMemoryScopeProvider DefaultScopeProvider()
        {
            AgentMemoryScope scope = GameHost != null ? GameHost.DefaultScope : null;
            return new FixedAgentMemoryScopeProvider(scope ?? AgentMemoryScope.Empty);
        }

        /// <summary>An orchestrator over this runtime (scopeProvider null: the GameHost's default scope, else the empty one).</summary>
        public AiOrchestrator CreateOrchestrator(IAgentMemoryScopeProvider scopeProvider = null)
        {
            return new AiOrchestrator(this, scopeProvider);
        }

        /// <summary>A memory store backed by this runtime (scopeProvider null: as CreateOrchestrator).</summary>
        public RuntimeAgentMemoryStore CreateMemoryStore(IAgentMemoryScopeProvider scopeProvider = null, string actor = null)
        {
            return new RuntimeAgentMemoryStore(this, scopeProvider, actor);
        }

        /// <summary>Whether the runtime (and its model) is ready; needs no token.</summary>
        public Task<HealthResponse> HealthAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return GuardAsync(Orchestrator.HealthAsync(new HealthRequest(), null, cancellationToken));
        }

        /// <summary>The runtime's current config of a role.</summary>
        public async Task<Ai.RoleMemoryConfig> GetRoleConfigAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            V1.RoleMemoryConfigProto config = await GuardAsync(
                Orchestrator.GetRoleConfigAsync(new GetRoleConfigRequest { RoleId = roleId ?? "" }, null, cancellationToken)).ConfigureAwait(false);
            return ProtoMapping.FromProto(config);
        }

        /// <summary>Every role the runtime's policy knows (built-in and configured), as the runtime holds them.</summary>
        public async Task<IReadOnlyList<Ai.RoleMemoryConfig>> ListRolesAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            ListRolesResponse response = await GuardAsync(
                Orchestrator.ListRolesAsync(new ListRolesRequest(), null, cancellationToken)).ConfigureAwait(false);
            var roles = new List<Ai.RoleMemoryConfig>(response.Roles.Count);
            foreach (V1.RoleMemoryConfigProto role in response.Roles)
            {
                if (!string.IsNullOrWhiteSpace(role.RoleId)) roles.Add(ProtoMapping.FromProto(role));  // a blank id has no config
            }
            return roles;
        }

        /// <summary>Push every role the game configured since the last push (ConfigureRole RPC).</summary>
        public Task SyncPolicyAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return PushAsync(null, null, cancellationToken);
        }

        /// <summary>Push one role's config if it changed since the last push (a no-op for untouched built-in roles).</summary>
        public Task EnsureRoleSyncedAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            return EnsureRoleSyncedAsync(roleId, null, cancellationToken);
        }

        /// <summary>EnsureRoleSyncedAsync with the push's call options (a synchronous store call bounds it too).</summary>
        internal Task EnsureRoleSyncedAsync(string roleId, CallOptions options, CancellationToken cancellationToken)
        {
            string role = (roleId ?? "").Trim();
            return role.Length == 0 ? Task.CompletedTask : PushAsync(role, options, cancellationToken);
        }

        /// <summary>Forget what was pushed (call after the runtime restarted; an unreachable runtime does this too).</summary>
        public void ResetPolicySync()
        {
            lock (_pushed)
            {
                _pushed.Clear();
            }
        }

        /// <summary>Awaits a call; an unreachable runtime resets the policy sync, since a restarted one forgot the roles.</summary>
        internal async Task<T> GuardAsync<T>(Task<T> call)
        {
            try
            {
                return await call.ConfigureAwait(false);
            }
            catch (UnavailableException)
            {
                ResetPolicySync();
                throw;
            }
        }

        /// <summary>See <see cref="GuardAsync{T}(Task{T})"/>.</summary>
        internal async Task GuardAsync(Task call)
        {
            try
            {
                await call.ConfigureAwait(false);
            }
            catch (UnavailableException)
            {
                ResetPolicySync();
                throw;
            }
        }

        /// <summary>Cancels every call in flight (turns end with OperationCanceledException, their callbacks and game tools stop).</summary>
        public void Dispose()
        {
            _transport.Dispose();
        }

        private async Task PushAsync(string onlyRole, CallOptions options, CancellationToken cancellationToken)
        {
            List<KeyValuePair<Ai.RoleMemoryConfig, long>> changed;
            lock (_pushed)
            {
                changed = Policy.ChangedSince(_pushed, onlyRole);
            }
            foreach (KeyValuePair<Ai.RoleMemoryConfig, long> entry in changed)
            {
                var request = new ConfigureRoleRequest { Config = ProtoMapping.ToProto(entry.Key) };
                await GuardAsync(Orchestrator.ConfigureRoleAsync(request, options, cancellationToken)).ConfigureAwait(false);
                lock (_pushed)
                {
                    long last;
                    if (!_pushed.TryGetValue(entry.Key.RoleId, out last) || last < entry.Value)
                    {
                        _pushed[entry.Key.RoleId] = entry.Value;
                    }
                }
            }
        }
    }
}
