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

        /// <summary>An orchestrator over a runtime; scopeProvider supplies the scope of requests without one.</summary>
        public AiOrchestrator(CoreAIRuntimeClient runtime, IAgentMemoryScopeProvider scopeProvider = null)
        {
            _runtime = runtime ?? throw new ArgumentNullException("runtime");
            _scopes = scopeProvider ?? new FixedAgentMemoryScopeProvider(AgentMemoryScope.Empty);
        }

        /// <summary>How long a turn may take when the request sets no Timeout (sent to the runtime as the turn's timeout).</summary>
        public TimeSpan DefaultTurnTimeout { get; set; } = TimeSpan.FromMinutes(5);

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
            V1.RunTaskRequest proto = await PrepareAsync(request, cancellationToken).ConfigureAwait(false);
            V1.RunTaskResponse response = await _runtime.GuardAsync(
                _runtime.Orchestrator.RunTaskAsync(proto, CallOptionsFor(request), cancellationToken)).ConfigureAwait(false);
            return ProtoMapping.FromProto(response);
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
            // The client's lifetime (Dispose, the game stopping) ends the turn, its callbacks and its tool calls.
            using (var dispatch = new CallbackDispatcher(context, cancellationToken, _runtime.Lifetime))
            {
                V1.RunTaskRequest proto = await PrepareAsync(request, dispatch.Token).ConfigureAwait(false);
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
            return ProtoMapping.FromProto(final);
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
