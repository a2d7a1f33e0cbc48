using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>What one item of a streamed turn carries.</summary>
    public enum AiTaskStreamItemKind
    {
        TextDelta,
        ToolCall,
        ToolResult,
        CutReport,
        MemoryWrite,
    }

    /// <summary>One item of a streamed turn.</summary>
    public sealed class AiTaskStreamItem
    {
        /// <summary>Which of the fields below is set.</summary>
        public AiTaskStreamItemKind Kind { get; internal set; }

        /// <summary>A piece of visible text (TextDelta).</summary>
        public string Text { get; internal set; } = "";

        /// <summary>A tool call (ToolCall).</summary>
        public AiToolCall ToolCall { get; internal set; }

        /// <summary>A tool result (ToolResult).</summary>
        public AiToolResult ToolResult { get; internal set; }

        /// <summary>The history cut report (CutReport).</summary>
        public V1.CutReport CutReport { get; internal set; }

        /// <summary>The turn's memory write, after the reply (MemoryWrite; only with AiTaskRequest.WaitForMemoryWrite).</summary>
        public AiMemoryWrite MemoryWrite { get; internal set; }
    }

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

    /// <summary>The enumerator of an <see cref="AiTaskStream"/>: MoveNextAsync / Current / DisposeAsync.</summary>
    public sealed class AiTaskStreamEnumerator
    {
        private readonly ConcurrentQueue<AiTaskStreamItem> _items = new ConcurrentQueue<AiTaskStreamItem>();
        private readonly SemaphoreSlim _available = new SemaphoreSlim(0);
        private readonly CancellationTokenSource _cancel;
        private Task<AiTaskResult> _finished;

        internal AiTaskStreamEnumerator(CancellationTokenSource cancel)
        {
            _cancel = cancel;
        }

        /// <summary>The item MoveNextAsync moved to.</summary>
        public AiTaskStreamItem Current { get; private set; }

        /// <summary>True with the next item in Current; false once the turn ended; the turn's failure is thrown here.</summary>
        public async Task<bool> MoveNextAsync()
        {
            await _available.WaitAsync().ConfigureAwait(false);
            AiTaskStreamItem item;
            if (_items.TryDequeue(out item))
            {
                Current = item;
                return true;
            }
            _available.Release();  // the end marker stays, so a further call answers false again
            Current = null;
            await Volatile.Read(ref _finished).ConfigureAwait(false);  // rethrows the turn's failure
            return false;
        }

        /// <summary>Stop the turn if it still runs (a `break` out of the loop) and wait until it ended.</summary>
        public async Task DisposeAsync()
        {
            if (Volatile.Read(ref _finished) == null)
            {
                _cancel.Cancel();
            }
            while (Volatile.Read(ref _finished) == null)
            {
                await _available.WaitAsync().ConfigureAwait(false);
                AiTaskStreamItem dropped;
                if (!_items.TryDequeue(out dropped)) _available.Release();
            }
            try
            {
                await _finished.ConfigureAwait(false);
            }
            catch (Exception)
            {
                // Disposal after a break or a failure: the failure was (or is) reported by MoveNextAsync / Result.
            }
            _cancel.Dispose();
        }

        internal void Add(AiTaskStreamItem item)
        {
            _items.Enqueue(item);
            _available.Release();
        }

        internal void Finish(Task<AiTaskResult> finished)
        {
            Volatile.Write(ref _finished, finished);
            _available.Release();  // the end marker: a release with no item
        }
    }
}
