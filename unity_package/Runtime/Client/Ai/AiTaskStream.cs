using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>
    /// A streamed turn in the async-enumerable pattern: <c>await foreach (var item in orchestrator.StreamTask(request))</c>
    /// compiles with Unity's C# 8+ compiler; the members can also be called directly (C# 7.2). The pattern rather
    /// than IAsyncEnumerable&lt;T&gt;, which the ".NET Framework" API level does not have.
    /// </summary>
    /// <remarks>One enumeration per stream. An <c>await foreach</c> resumes on the caller's context (Unity's main thread).</remarks>
    public sealed class AiTaskStream
    {
        private readonly AiOrchestrator _orchestrator;
        private readonly AiTaskRequest _request;
        private readonly CancellationToken _cancellation;
        private readonly TaskCompletionSource<AiTaskResult> _result = new TaskCompletionSource<AiTaskResult>();
        private int _started;

        internal AiTaskStream(AiOrchestrator orchestrator, AiTaskRequest request, CancellationToken cancellationToken)
        {
            _orchestrator = orchestrator;
            _request = request;
            _cancellation = cancellationToken;
        }

        /// <summary>The turn's outcome once the stream ended (its failure when it failed).</summary>
        public Task<AiTaskResult> Result => _result.Task;

        /// <summary>Start the turn and enumerate its items (the pattern's entry point).</summary>
        /// <exception cref="InvalidOperationException">The stream was already enumerated.</exception>
        public AiTaskStreamEnumerator GetAsyncEnumerator(CancellationToken cancellationToken = default(CancellationToken))
        {
            if (Interlocked.Exchange(ref _started, 1) != 0)
            {
                throw new InvalidOperationException("a turn stream can be enumerated once");
            }
            var linked = CancellationTokenSource.CreateLinkedTokenSource(_cancellation, cancellationToken);
            var enumerator = new AiTaskStreamEnumerator(linked);
            var handlers = new AiTaskStreamHandlers
            {
                RunOnCallerContext = false,  // the consumer's own await brings each item to its context
                OnTextDelta = t => enumerator.Add(new AiTaskStreamItem { Kind = AiTaskStreamItemKind.TextDelta, Text = t }),
                OnToolCall = c => enumerator.Add(new AiTaskStreamItem { Kind = AiTaskStreamItemKind.ToolCall, ToolCall = c }),
                OnToolResult = r => enumerator.Add(new AiTaskStreamItem { Kind = AiTaskStreamItemKind.ToolResult, ToolResult = r }),
                OnCutReport = r => enumerator.Add(new AiTaskStreamItem { Kind = AiTaskStreamItemKind.CutReport, CutReport = r }),
                OnMemoryWrite = w => enumerator.Add(new AiTaskStreamItem { Kind = AiTaskStreamItemKind.MemoryWrite, MemoryWrite = w }),
            };
            Task<AiTaskResult> turn = _orchestrator.StreamTaskAsync(_request, handlers, linked.Token);
            turn.ContinueWith(t =>
            {
                if (t.IsFaulted) _result.TrySetException(t.Exception.InnerExceptions);
                else if (t.IsCanceled) _result.TrySetCanceled();
                else _result.TrySetResult(t.Result);
                enumerator.Finish(_result.Task);
            }, TaskContinuationOptions.ExecuteSynchronously);
            return enumerator;
        }
    }
}
