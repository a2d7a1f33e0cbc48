using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Runtime;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>Runs turns of roles on the CoreAI runtime: the whole reply, or streamed as it is generated.</summary>
    /// <remarks>
    /// Before each turn the role's policy entry is pushed to the runtime if it changed (see
    /// <see cref="CoreAIRuntimeClient.EnsureRoleSyncedAsync"/>). Transport failures throw
    /// <see cref="CoreAIRuntimeException"/>s; a turn that ran but failed (model error, timeout on the
    /// runtime, tool loop ended) returns a result whose <see cref="AiTaskResult.Status"/> says so.
    /// </remarks>
    public sealed class AiOrchestrator
    {
        private readonly CoreAIRuntimeClient _runtime;
        private readonly IAgentMemoryScopeProvider _scopes;

        /// <summary>An orchestrator over a runtime; scopeProvider supplies the scope of requests without one (null: the client's default scope, GameHost.DefaultScope, else empty).</summary>
        public AiOrchestrator(CoreAIRuntimeClient runtime, IAgentMemoryScopeProvider scopeProvider = null)
        {
            _runtime = runtime ?? throw new ArgumentNullException("runtime");
            _scopes = scopeProvider ?? _runtime.DefaultScopeProvider();
        }

        /// <summary>How long a turn may take when the request sets no Timeout (sent to the runtime as the turn's timeout).</summary>
        public TimeSpan DefaultTurnTimeout { get; set; } = TimeSpan.FromMinutes(5);

        /// <summary>How long the runtime waits for a memory write when a wait sets no timeout (at most 120 s).</summary>
        public TimeSpan DefaultMemoryWriteTimeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>A turn's memory write changed the memory (small models write it after the reply).</summary>
        /// <remarks>
        /// Raised once per changing write of a turn this orchestrator ran, after the turn returned, on the
        /// SynchronizationContext current when the turn was started, else the game's main thread (the client's
        /// GameHost; in Unity, either way the main thread, so a quest log or a "Bram will remember that" line may touch
        /// the UI); with neither, on a thread-pool thread. Never after the client's lifetime ended (Dispose, the game
        /// stopping). A turn whose write is still pending is watched only while there is a subscriber. A handler's
        /// exception never affects a turn.
        /// </remarks>
        public event Action<AiMemoryWrite> MemoryChanged;

        /// <summary>The design note's form: run one turn and return the visible reply.</summary>
        /// <remarks>A turn that ended its tool loop returns the loop's closing message; see <see cref="RunTaskWithResultAsync"/> for the whole outcome.</remarks>
        /// <exception cref="AiTaskFailedException">The turn failed or timed out on the runtime (its result is attached).</exception>
        /// <exception cref="OperationCanceledException">The turn was cancelled.</exception>
        public async Task<string> RunTaskAsync(AiTaskRequest request, CancellationToken cancellationToken = default(CancellationToken))
        {
            AiTaskResult result = await RunTaskWithResultAsync(request, cancellationToken).ConfigureAwait(false);
            switch (result.Status)
            {
                case AiTaskStatus.Ok:
                case AiTaskStatus.ToolLoopEnded:
                    return result.Text;
                case AiTaskStatus.Cancelled:
                    throw new OperationCanceledException("the turn was cancelled: " + result.Error);
                default:
                    throw new AiTaskFailedException(result);
            }
        }

        /// <summary>Run one turn and return its whole outcome (status, text, tool calls, cut report, usage).</summary>
        /// <remarks>A role with game tools runs streamed (only a stream can hand their calls to the game); the handlers
        /// run on the caller's SynchronizationContext as in <see cref="StreamTaskAsync(AiTaskRequest, AiTaskStreamHandlers, CancellationToken)"/>.</remarks>
        public async Task<AiTaskResult> RunTaskWithResultAsync(AiTaskRequest request, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (request != null && ToolsFor(request).Count > 0)
            {
                return await StreamTaskAsync(request, new AiTaskStreamHandlers(), cancellationToken).ConfigureAwait(false);
            }
            SynchronizationContext caller = SynchronizationContext.Current;
            V1.RunTaskRequest proto = await PrepareAsync(request, cancellationToken).ConfigureAwait(false);
            V1.RunTaskResponse response = await _runtime.GuardAsync(
                _runtime.Orchestrator.RunTaskAsync(proto, CallOptionsFor(request), cancellationToken)).ConfigureAwait(false);
            AiTaskResult result = ProtoMapping.FromProto(response);
            result.Target = proto.Target;
            Announce(result, EventContext(caller));
            return result;
        }

        /// <summary>Run one turn, calling onTextDelta with each piece of text as it arrives; returns the final outcome.</summary>
        public Task<AiTaskResult> StreamTaskAsync(AiTaskRequest request, Action<string> onTextDelta, CancellationToken cancellationToken = default(CancellationToken))
        {
            return StreamTaskAsync(request, new AiTaskStreamHandlers { OnTextDelta = onTextDelta }, cancellationToken);
        }

        /// <summary>Run one turn with callbacks for text, tool calls, tool results and the cut report; returns the final outcome.</summary>
        /// <remarks>
        /// The callbacks run in order on the SynchronizationContext current when this is called (in Unity: the main
        /// thread, so a typewriter may touch a Text), and the returned task completes after the last of them ran.
        /// Without a context, or with <see cref="AiTaskStreamHandlers.RunOnCallerContext"/> false, they run on the
        /// thread that reads the stream. A callback that throws ends the turn with its exception.
        /// </remarks>
        public async Task<AiTaskResult> StreamTaskAsync(AiTaskRequest request, AiTaskStreamHandlers handlers, CancellationToken cancellationToken = default(CancellationToken))
        {
            handlers = handlers ?? new AiTaskStreamHandlers();
            GameHost host = _runtime.GameHost;
            SynchronizationContext caller = SynchronizationContext.Current;
            SynchronizationContext hostMain = host == null ? null : host.MainThread;
            // Callbacks: the caller's context, else (a turn started after ConfigureAwait(false)) the game's main thread.
            SynchronizationContext context = handlers.RunOnCallerContext ? caller ?? hostMain : null;
            // Main-thread game tools: the game's main thread (captured by the Unity layer), else the caller's context;
            // with neither they are refused, never run on the thread pool.
            SynchronizationContext toolContext = hostMain ?? caller;
            IReadOnlyList<GameTool> tools = request == null ? new GameTool[0] : ToolsFor(request);
            var toolCalls = new List<Task>();
            V1.RunTaskResponse final = null;
            V1.MemoryWrite memoryWrite = null;
            V1.AgentTarget target;
            // The client's lifetime (Dispose, the game stopping) ends the turn, its callbacks and its tool calls.
            using (var dispatch = new CallbackDispatcher(context, cancellationToken, _runtime.Lifetime))
            {
                V1.RunTaskRequest proto = await PrepareAsync(request, dispatch.Token).ConfigureAwait(false);
                target = proto.Target;
                Action<V1.TurnEvent> onEvent = e =>
                {
                    if (e.Final != null)
                    {
                        final = e.Final;
                    }
                    else if (e.ClientToolCall != null)
                    {
                        lock (toolCalls) toolCalls.Add(ServeToolCallAsync(tools, e.ClientToolCall, toolContext, host, dispatch.Token));
                    }
                    else if (e.MemoryWrite != null)
                    {
                        memoryWrite = e.MemoryWrite;  // after final: the stream stayed open for it (WaitForMemoryWrite)
                        dispatch.Run(() => Deliver(handlers, e));
                    }
                    else
                    {
                        dispatch.Run(() => Deliver(handlers, e));
                    }
                };
                try
                {
                    await _runtime.GuardAsync(
                        _runtime.Orchestrator.StreamTaskAsync(proto, onEvent, CallOptionsFor(request), dispatch.Token)).ConfigureAwait(false);
                }
                catch (Exception) when (dispatch.Failed)
                {
                    // A callback threw on the context and cancelled the stream: its exception is the one to report.
                }
                await dispatch.DrainAsync().ConfigureAwait(false);
                Task[] pending;
                lock (toolCalls) pending = toolCalls.ToArray();
                try
                {
                    await Task.WhenAll(pending).ConfigureAwait(false);
                }
                catch (Exception)
                {
                    // A handler still running when the turn ended was cancelled; the turn's outcome is in final.
                }
                dispatch.ThrowIfFailed();
            }
            if (final == null)
            {
                throw new InternalException("the turn stream ended without its final result");
            }
            AiTaskResult result = ProtoMapping.FromProto(final);
            result.Target = target;
            if (memoryWrite != null)
            {
                result.MemoryWrite = ProtoMapping.FromProto(memoryWrite);
                result.MemoryWritePending = false;
            }
            Announce(result, EventContext(caller));
            return result;
        }

        /// <summary>Wait for the memory write of a turn that returned with <see cref="AiTaskResult.MemoryWritePending"/>.</summary>
        /// <returns>The write once it landed (it may have changed nothing: see <see cref="AiMemoryWrite.Changed"/>); the
        /// result's own write when the turn waited for it; null when the turn has no write to wait for.</returns>
        /// <exception cref="TimeoutException">The write had not landed within timeout (null: <see cref="DefaultMemoryWriteTimeout"/>).</exception>
        public async Task<AiMemoryWrite> WaitForMemoryWriteAsync(AiTaskResult result, TimeSpan? timeout = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (result == null)
            {
                throw new ArgumentNullException("result");
            }
            if (result.MemoryWrite != null)
            {
                return result.MemoryWrite;
            }
            if (!result.MemoryWritePending || result.Target == null || string.IsNullOrEmpty(result.TraceId))
            {
                return null;
            }
            IReadOnlyList<AiMemoryWrite> writes = await WaitAsync(result.Target, result.TraceId, timeout, cancellationToken).ConfigureAwait(false);
            return writes.Count > 0 ? writes[0] : null;
        }

        /// <summary>Wait until every memory write of a conversation pending now has landed; returns them, oldest first.</summary>
        /// <remarks>scope null: the orchestrator's scope provider, as for a turn; actor null or "local": none.</remarks>
        /// <exception cref="TimeoutException">Some write had not landed within timeout (null: <see cref="DefaultMemoryWriteTimeout"/>).</exception>
        public Task<IReadOnlyList<AiMemoryWrite>> WaitForMemoryWritesAsync(string roleId, AgentMemoryScope scope = null,
            string actor = null, TimeSpan? timeout = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            string role = string.IsNullOrWhiteSpace(roleId) ? "Creator" : roleId.Trim();
            AgentMemoryScope resolved = scope ?? _scopes.GetScope(role) ?? AgentMemoryScope.Empty;
            return WaitAsync(ProtoMapping.Target(role, resolved, actor), "", timeout, cancellationToken);
        }

        private async Task<IReadOnlyList<AiMemoryWrite>> WaitAsync(V1.AgentTarget target, string traceId, TimeSpan? timeout,
            CancellationToken cancellationToken)
        {
            TimeSpan wait = timeout ?? DefaultMemoryWriteTimeout;
            if (wait < TimeSpan.Zero || wait > TimeSpan.FromSeconds(120))
            {
                throw new ArgumentOutOfRangeException("timeout", "a memory write wait takes 0 to 120 seconds");
            }
            var request = new V1.WaitMemoryWritesRequest
            {
                Target = target, TraceId = traceId ?? "", TimeoutMs = Math.Max(1, (int)Math.Ceiling(wait.TotalMilliseconds)),
            };
            V1.WaitMemoryWritesResponse response = await _runtime.GuardAsync(_runtime.Orchestrator.WaitMemoryWritesAsync(
                request, CallOptions.WithTimeout(wait + TimeSpan.FromSeconds(10)), cancellationToken)).ConfigureAwait(false);
            if (response.Pending)
            {
                throw new TimeoutException("the memory write did not land within " + wait.TotalSeconds + " s");
            }
            var writes = new List<AiMemoryWrite>();
            foreach (V1.MemoryWrite write in response.Writes)
            {
                writes.Add(ProtoMapping.FromProto(write));
            }
            return writes;
        }

        /// <summary>Raise MemoryChanged for the turn's write: now when the turn carried it, else once it landed (only
        /// while someone listens).</summary>
        private void Announce(AiTaskResult result, SynchronizationContext context)
        {
            if (result.MemoryWrite != null)
            {
                Raise(result.MemoryWrite, context);
            }
            else if (result.MemoryWritePending && MemoryChanged != null)
            {
                Task watching = WatchMemoryWriteAsync(result, context);  // never faults: see its catch
            }
        }

        private async Task WatchMemoryWriteAsync(AiTaskResult result, SynchronizationContext context)
        {
            try
            {
                AiMemoryWrite write = await WaitForMemoryWriteAsync(result, TimeSpan.FromSeconds(120)).ConfigureAwait(false);
                if (write != null) Raise(write, context);
            }
            catch (Exception)
            {
                // The runtime went away or the write took longer than 120 s: no event (WaitForMemoryWriteAsync reports why).
            }
        }

        /// <summary>Where MemoryChanged runs: the turn's caller context, else the game's main thread.</summary>
        private SynchronizationContext EventContext(SynchronizationContext caller)
        {
            GameHost host = _runtime.GameHost;
            return caller ?? (host == null ? null : host.MainThread);
        }

        private void Raise(AiMemoryWrite write, SynchronizationContext context)
        {
            Action<AiMemoryWrite> handlers = MemoryChanged;
            CancellationToken lifetime = _runtime.Lifetime;
            if (!write.Changed || handlers == null || lifetime.IsCancellationRequested)
            {
                return;
            }
            if (context != null)
            {
                context.Post(_ =>
                {
                    if (!lifetime.IsCancellationRequested) handlers(write);  // the game may have stopped meanwhile
                }, null);
                return;
            }
            ThreadPool.QueueUserWorkItem(_ =>
            {
                try
                {
                    if (!lifetime.IsCancellationRequested) handlers(write);
                }
                catch (Exception)
                {
                    // A handler's exception never affects a turn; with no context there is no one to report it to.
                }
            });
        }

        /// <summary>The turn as an async stream of items, consumable with <c>await foreach</c> (C# 8+) or its members directly.</summary>
        /// <remarks>Nothing runs until enumeration starts; items are read in order; <see cref="AiTaskStream.Result"/> has the outcome.</remarks>
        public AiTaskStream StreamTask(AiTaskRequest request, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (request == null)
            {
                throw new ArgumentNullException("request");
            }
            return new AiTaskStream(this, request, cancellationToken);
        }

        private static void Deliver(AiTaskStreamHandlers handlers, V1.TurnEvent e)
        {
            if (e.TextDelta != null)
            {
                if (handlers.OnTextDelta != null && !string.IsNullOrEmpty(e.TextDelta.Text)) handlers.OnTextDelta(e.TextDelta.Text);
            }
            else if (e.ToolCall != null)
            {
                if (handlers.OnToolCall != null) handlers.OnToolCall(ProtoMapping.FromProto(e.ToolCall));
            }
            else if (e.ToolResult != null)
            {
                if (handlers.OnToolResult != null) handlers.OnToolResult(ProtoMapping.FromProto(e.ToolResult));
            }
            else if (e.CutReport != null)
            {
                if (handlers.OnCutReport != null) handlers.OnCutReport(e.CutReport);
            }
            else if (e.MemoryWrite != null)
            {
                if (handlers.OnMemoryWrite != null) handlers.OnMemoryWrite(ProtoMapping.FromProto(e.MemoryWrite));
            }
        }

        private IReadOnlyList<GameTool> ToolsFor(AiTaskRequest request)
        {
            string role = string.IsNullOrWhiteSpace(request.RoleId) ? "Creator" : request.RoleId.Trim();
            return _runtime.Policy.Tools.For(role);
        }

        /// <summary>Run one game-tool call (on context when the tool asks for the main thread) and submit its result.</summary>
        /// <remarks>Never faults for the turn's own end: a cancelled turn, or a runtime that no longer waits for this result
        /// (timed out, ended: NOT_FOUND, FAILED_PRECONDITION, ALREADY_EXISTS) or is gone, is reported by the stream.</remarks>
        private async Task ServeToolCallAsync(IReadOnlyList<GameTool> tools, V1.ClientToolCall call, SynchronizationContext context,
            GameHost host, CancellationToken cancellationToken)
        {
            try
            {
                GameTool tool = null;
                foreach (GameTool candidate in tools)
                {
                    if (candidate.Name == call.Name) tool = candidate;
                }
                ToolResult result;
                if (tool == null)
                {
                    result = ToolResult.Fail("tool '" + call.Name + "' has no handler in this game");
                }
                else if (tool.RunOnMainThread && context == null)
                {
                    result = ToolResult.Fail(NoMainThread(tool.Name));
                }
                else if (tool.RunOnMainThread)
                {
                    result = await OnContext(context, () => InvokeOnMainThread(tool, call, host, cancellationToken)).ConfigureAwait(false);
                }
                else
                {
                    cancellationToken.ThrowIfCancellationRequested();
                    result = await Task.Run(() => tool.InvokeAsync(call.ArgumentsJson, cancellationToken)).ConfigureAwait(false);
                }
                var submit = new V1.SubmitToolResultRequest
                {
                    TurnId = call.TurnId, CallId = call.CallId, Success = result.Success, Content = result.Content,
                };
                await _runtime.Orchestrator.SubmitToolResultAsync(submit, null, cancellationToken).ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
                // The turn was cancelled while the handler ran: the stream ends with that.
            }
            catch (CoreAIRuntimeException)
            {
                // The turn no longer waits for this result, or the runtime is gone: the stream reports the outcome.
            }
        }

        /// <summary>Why a main-thread tool was not run: the turn has no main thread to run it on.</summary>
        internal static string NoMainThread(string tool)
        {
            return "tool '" + tool + "' was not run: it runs on the main thread (runOnMainThread: true) and this turn has none; "
                + "create the client with CoreAIRuntimeBootstrap.CreateClient (it captures Unity's main thread), start the turn on "
                + "the main thread, or declare the tool with runOnMainThread: false";
        }

        /// <summary>On the main thread, right before the handler: a stopped turn or game runs nothing of the game's.</summary>
        private static Task<ToolResult> InvokeOnMainThread(GameTool tool, V1.ClientToolCall call, GameHost host, CancellationToken cancellationToken)
        {
            cancellationToken.ThrowIfCancellationRequested();
            if (host != null && host.CanRunGameCode != null && !host.CanRunGameCode())
            {
                return Task.FromResult(ToolResult.Fail("tool '" + tool.Name + "' was not run: the game is not playing (Play Mode ended)"));
            }
            return tool.InvokeAsync(call.ArgumentsJson, cancellationToken);
        }

        private static Task<ToolResult> OnContext(SynchronizationContext context, Func<Task<ToolResult>> work)
        {
            var done = new TaskCompletionSource<ToolResult>();
            context.Post(_ =>
            {
                Task<ToolResult> running;
                try
                {
                    running = work();
                }
                catch (Exception e)
                {
                    done.TrySetException(e);
                    return;
                }
                running.ContinueWith(t =>
                {
                    if (t.IsFaulted) done.TrySetException(t.Exception.InnerExceptions);
                    else if (t.IsCanceled) done.TrySetCanceled();
                    else done.TrySetResult(t.Result);
                }, TaskContinuationOptions.ExecuteSynchronously);
            }, null);
            return done.Task;
        }

        private async Task<V1.RunTaskRequest> PrepareAsync(AiTaskRequest request, CancellationToken cancellationToken)
        {
            if (request == null)
            {
                throw new ArgumentNullException("request");
            }
            string role = string.IsNullOrWhiteSpace(request.RoleId) ? "Creator" : request.RoleId.Trim();
            await _runtime.EnsureRoleSyncedAsync(role, cancellationToken).ConfigureAwait(false);
            AgentMemoryScope scope = request.Scope ?? _scopes.GetScope(role) ?? AgentMemoryScope.Empty;
            V1.RunTaskRequest proto = ProtoMapping.ToProto(request, scope);
            // No Timeout: the orchestrator's DefaultTurnTimeout, as documented (the runtime's own default is shorter).
            if (!request.Timeout.HasValue) proto.TimeoutMs = ProtoMapping.Milliseconds(DefaultTurnTimeout);
            foreach (GameTool tool in _runtime.Policy.Tools.For(role))
            {
                proto.ClientTools.Add(tool.ToProto());
            }
            return proto;
        }

        private CallOptions CallOptionsFor(AiTaskRequest request)
        {
            TimeSpan turn = request.Timeout ?? DefaultTurnTimeout;
            // The runtime ends the turn itself at its timeout and still answers; allow a little on top for that answer.
            return CallOptions.WithTimeout(turn == Timeout.InfiniteTimeSpan ? turn : turn + TimeSpan.FromSeconds(10));
        }
    }
}
