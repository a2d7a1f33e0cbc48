using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Runtime;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>
    /// <see cref="IAgentMemoryStore"/> backed by the CoreAI runtime: every call is an RPC to its MemoryStore,
    /// so game code, the model's memory tool and the runtime's turns see the same data.
    /// </summary>
    /// <remarks>
    /// The synchronous methods block on the RPC (a few hundred microseconds to a few milliseconds on
    /// localhost), at most <see cref="SynchronousCallTimeout"/> (2 s by default, then DeadlineExceededException):
    /// called from Update, a hung runtime costs one hitch, not a frozen game. Each has an Async twin for code that
    /// must not block. Which data a call touches is decided by the scope provider and actor given here (contract §4).
    /// </remarks>
    public sealed class RuntimeAgentMemoryStore : IAgentMemoryStore, IAgentMemoryVersionStore
    {
        /// <summary>The SynchronousCallTimeout of stores created from now on: 2 s (a hitch at worst, never the client's 30 s).</summary>
        public static TimeSpan DefaultSynchronousCallTimeout { get; set; } = TimeSpan.FromSeconds(2);

        private readonly CoreAIRuntimeClient _runtime;
        private readonly IAgentMemoryScopeProvider _scopes;
        private readonly string _actor;
        private CallOptions _callOptions;  // null: the client's default timeout (the async twins)

        /// <summary>A store over a runtime; scopeProvider null is the client's default scope (GameHost.DefaultScope, else empty); actor null is no named actor.</summary>
        public RuntimeAgentMemoryStore(CoreAIRuntimeClient runtime, IAgentMemoryScopeProvider scopeProvider = null, string actor = null)
        {
            _runtime = runtime ?? throw new ArgumentNullException("runtime");
            _scopes = scopeProvider ?? _runtime.DefaultScopeProvider();
            _actor = actor;
        }

        /// <summary>How long a synchronous method (TryLoad, Save, GetChatHistory …) may block before it throws DeadlineExceededException.</summary>
        public TimeSpan SynchronousCallTimeout { get; set; } = DefaultSynchronousCallTimeout;

        /// <summary>This store for one synchronous call: its RPCs bounded by SynchronousCallTimeout.</summary>
        private RuntimeAgentMemoryStore Blocking()
        {
            return new RuntimeAgentMemoryStore(_runtime, _scopes, _actor) { _callOptions = CallOptions.WithTimeout(SynchronousCallTimeout) };
        }

        /// <summary>The same runtime seen through a fixed scope (and optional named actor).</summary>
        public RuntimeAgentMemoryStore ForScope(AgentMemoryScope scope, string actor = null)
        {
            return new RuntimeAgentMemoryStore(_runtime, new FixedAgentMemoryScopeProvider(scope), actor ?? _actor);
        }

        // -- IAgentMemoryStore ---------------------------------------------------------------------

        /// <inheritdoc />
        public bool TryLoad(string roleId, out AgentMemoryState state)
        {
            state = Wait(Blocking().TryLoadAsync(roleId));
            return state != null;
        }

        /// <inheritdoc />
        public void Save(string roleId, AgentMemoryState state)
        {
            Wait(Blocking().SaveAsync(roleId, state));
        }

        /// <inheritdoc />
        public void Clear(string roleId)
        {
            Wait(Blocking().ClearAsync(roleId));
        }

        /// <inheritdoc />
        public void AppendChatMessage(string roleId, string role, string content, bool persistToDisk = true)
        {
            Wait(Blocking().AppendChatMessageAsync(roleId, role, content, persistToDisk));
        }

        /// <inheritdoc />
        public ChatMessage[] GetChatHistory(string roleId, int maxMessages = 0)
        {
            return Wait(Blocking().GetChatHistoryAsync(roleId, maxMessages));
        }

        /// <inheritdoc />
        public void ClearChatHistory(string roleId)
        {
            Wait(Blocking().ClearChatHistoryAsync(roleId));
        }

        /// <inheritdoc />
        public IReadOnlyList<AgentMemoryVersion> ListVersions(string roleId)
        {
            return Wait(Blocking().ListVersionsAsync(roleId));
        }

        /// <inheritdoc />
        public MemoryToolResult RevertVersion(string roleId, int version)
        {
            return Wait(Blocking().RevertAsync(roleId, version));
        }

        /// <summary>Run one memory tool call exactly as the model would; a refused edit is a result with Success false.</summary>
        public MemoryToolResult ExecuteMemoryTool(string roleId, MemoryToolCall call)
        {
            return Wait(Blocking().ExecuteMemoryToolAsync(roleId, call));
        }

        // -- async twins ----------------------------------------------------------------------------

        /// <summary>The state, or null when the role has no memory document.</summary>
        /// <exception cref="FailedPreconditionException">The document exists but cannot be read (it is never reported as empty).</exception>
        public async Task<AgentMemoryState> TryLoadAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            V1.LoadStateResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.LoadStateAsync(new V1.LoadStateRequest { Target = Target(roleId) }, _callOptions, cancellationToken)).ConfigureAwait(false);
            switch (response.Status)
            {
                case V1.LoadStatus.Loaded:
                    return ProtoMapping.FromProto(response.State ?? new V1.AgentMemoryStateProto());
                case V1.LoadStatus.Failed:
                    throw new FailedPreconditionException("the memory document exists but cannot be read: " + response.Reason);
                default:
                    return null;
            }
        }

        /// <summary>Replace the whole state (heals an unreadable document).</summary>
        public Task SaveAsync(string roleId, AgentMemoryState state, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (state == null)
            {
                throw new ArgumentNullException("state");
            }
            var request = new V1.SaveStateRequest { Target = Target(roleId), State = ProtoMapping.ToProto(state) };
            return _runtime.GuardAsync(_runtime.MemoryStore.SaveStateAsync(request, _callOptions, cancellationToken));
        }

        /// <summary>Store-level Clear: the document, its versions and snapshot; chat stays.</summary>
        public Task ClearAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            return _runtime.GuardAsync(_runtime.MemoryStore.ClearMemoryAsync(new V1.ClearMemoryRequest { Target = Target(roleId) }, _callOptions, cancellationToken));
        }

        /// <summary>Append a chat message (persistToDisk false: the runtime process only).</summary>
        public Task AppendChatMessageAsync(string roleId, string role, string content, bool persistToDisk = true, CancellationToken cancellationToken = default(CancellationToken))
        {
            var request = new V1.AppendChatMessageRequest { Target = Target(roleId), Role = role ?? "", Content = content ?? "", Persist = persistToDisk };
            return _runtime.GuardAsync(_runtime.MemoryStore.AppendChatMessageAsync(request, _callOptions, cancellationToken));
        }

        /// <summary>Oldest first, the newest maxMessages (0 = all).</summary>
        public async Task<ChatMessage[]> GetChatHistoryAsync(string roleId, int maxMessages = 0, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (maxMessages < 0)
            {
                throw new ArgumentOutOfRangeException("maxMessages", maxMessages, "maxMessages must be >= 0 (0 = all)");
            }
            var request = new V1.GetChatHistoryRequest { Target = Target(roleId), MaxMessages = maxMessages };
            V1.GetChatHistoryResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.GetChatHistoryAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return response.Messages.ConvertAll(ProtoMapping.FromProto).ToArray();
        }

        /// <summary>Delete chat history, transcript and rolling summary; memory stays.</summary>
        public Task ClearChatHistoryAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            return _runtime.GuardAsync(_runtime.MemoryStore.ClearChatHistoryAsync(new V1.ClearChatHistoryRequest { Target = Target(roleId) }, _callOptions, cancellationToken));
        }

        /// <summary>Retained versions, oldest first.</summary>
        public async Task<IReadOnlyList<AgentMemoryVersion>> ListVersionsAsync(string roleId, CancellationToken cancellationToken = default(CancellationToken))
        {
            V1.ListVersionsResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.ListVersionsAsync(new V1.ListVersionsRequest { Target = Target(roleId) }, _callOptions, cancellationToken)).ConfigureAwait(false);
            return response.Versions.ConvertAll(ProtoMapping.FromProto);
        }

        /// <summary>Restore a retained version (a new "revert" version).</summary>
        /// <exception cref="NotFoundException">Unknown version or role.</exception>
        public async Task<MemoryToolResult> RevertAsync(string roleId, int version, CancellationToken cancellationToken = default(CancellationToken))
        {
            var request = new V1.RevertMemoryRequest { Target = Target(roleId), Version = version };
            V1.MemoryToolResultProto result = await _runtime.GuardAsync(
                _runtime.MemoryStore.RevertMemoryAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return ProtoMapping.FromProto(result);
        }

        /// <summary>Unified diff between two retained versions (0 = the empty document).</summary>
        public async Task<string> DiffVersionsAsync(string roleId, int fromVersion, int toVersion, CancellationToken cancellationToken = default(CancellationToken))
        {
            var request = new V1.DiffVersionsRequest { Target = Target(roleId), FromVersion = fromVersion, ToVersion = toVersion };
            V1.DiffVersionsResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.DiffVersionsAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return response.UnifiedDiff ?? "";
        }

        /// <summary>One memory tool call (the role's policy, e.g. MaxMemoryChars, is pushed first if it changed).</summary>
        /// <exception cref="InvalidArgumentException">Not a valid memory call (blank role, unknown action …).</exception>
        /// <exception cref="FailedPreconditionException">The document cannot be read.</exception>
        /// <exception cref="ResourceExhaustedException">MaxMemoryChars would be exceeded.</exception>
        public async Task<MemoryToolResult> ExecuteMemoryToolAsync(string roleId, MemoryToolCall call, CancellationToken cancellationToken = default(CancellationToken))
        {
            V1.ApplyMemoryToolRequest request = ProtoMapping.ToProto(Target(roleId), call);
            await _runtime.EnsureRoleSyncedAsync(roleId, _callOptions, cancellationToken).ConfigureAwait(false);
            V1.MemoryToolResultProto result = await _runtime.GuardAsync(
                _runtime.MemoryStore.ApplyMemoryToolAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return ProtoMapping.FromProto(result);
        }

        /// <summary>A memory call given as the model's raw argument JSON (repaired like the model's).</summary>
        public async Task<MemoryToolResult> ExecuteMemoryToolJsonAsync(string roleId, string argumentsJson, CancellationToken cancellationToken = default(CancellationToken))
        {
            var request = new V1.ApplyMemoryToolRequest { Target = Target(roleId), ArgumentsJson = argumentsJson ?? "" };
            await _runtime.EnsureRoleSyncedAsync(roleId, _callOptions, cancellationToken).ConfigureAwait(false);
            V1.MemoryToolResultProto result = await _runtime.GuardAsync(
                _runtime.MemoryStore.ApplyMemoryToolAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return ProtoMapping.FromProto(result);
        }

        /// <summary>Everything of the named roles (default: every role and actor with saves in the scope) and actors in one scope, for a save slot.</summary>
        public async Task<AgentMemorySnapshot> ExportSnapshotAsync(
            AgentMemoryScope scope, IEnumerable<string> roleIds = null, IEnumerable<string> actors = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var request = new V1.ExportSnapshotRequest { Scope = ProtoMapping.ToProto(scope) };
            if (roleIds != null) request.RoleIds.AddRange(roleIds);
            if (actors != null) request.Actors.AddRange(actors);
            V1.ExportSnapshotResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.ExportSnapshotAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return new AgentMemorySnapshot(response.Snapshot ?? new V1.ScopeSnapshot());
        }

        /// <summary>
        /// "Forget this player": erases every save whose scope has the non-blank fields of <paramref name="scope"/>
        /// (a player: tenant + user, every session, topic, role and actor; a session or topic narrows it) and everything
        /// the runtime's turn engine and model keep of those conversations. The response says how many saves were erased,
        /// and how many saves nobody can be told the owner of (written before the runtime indexed identities; erase
        /// those by role).
        /// </summary>
        public Task<V1.ForgetPlayerResponse> ForgetPlayerAsync(AgentMemoryScope scope, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (scope == null || scope.IsEmpty)
            {
                throw new ArgumentException("scope names the player to forget (its user id, with its tenant) and must not be empty", "scope");
            }
            var request = new V1.ForgetPlayerRequest { Scope = ProtoMapping.ToProto(scope) };
            return _runtime.GuardAsync(_runtime.MemoryStore.ForgetPlayerAsync(request, _callOptions, cancellationToken));
        }

        /// <summary>Replace each identity's data from a snapshot (into targetScope, or the snapshot's own); returns the roles imported.</summary>
        public async Task<int> ImportSnapshotAsync(AgentMemorySnapshot snapshot, AgentMemoryScope targetScope = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (snapshot == null)
            {
                throw new ArgumentNullException("snapshot");
            }
            var request = new V1.ImportSnapshotRequest { Snapshot = snapshot.Proto };
            if (targetScope != null)
            {
                request.TargetScope = ProtoMapping.ToProto(targetScope);
            }
            V1.ImportSnapshotResponse response = await _runtime.GuardAsync(
                _runtime.MemoryStore.ImportSnapshotAsync(request, _callOptions, cancellationToken)).ConfigureAwait(false);
            return response.RolesImported;
        }

        private V1.AgentTarget Target(string roleId)
        {
            string role = (roleId ?? "").Trim();
            AgentMemoryScope scope = role.Length == 0 ? AgentMemoryScope.Empty : (_scopes.GetScope(role) ?? AgentMemoryScope.Empty);
            return ProtoMapping.Target(roleId, scope, _actor);
        }

        private static T Wait<T>(Task<T> task)
        {
            // Every await below uses ConfigureAwait(false), so blocking here cannot deadlock Unity's main thread.
            return task.GetAwaiter().GetResult();
        }

        private static void Wait(Task task)
        {
            task.GetAwaiter().GetResult();
        }
    }
}
