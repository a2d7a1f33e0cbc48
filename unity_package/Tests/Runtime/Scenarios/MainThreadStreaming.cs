// A simulated Unity main thread (a SynchronizationContext pumped by one dedicated thread, like Unity's player
// loop pumping UnitySynchronizationContext) and streamed turns started on it.
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;

namespace CoreAI.Tests
{
    /// <summary>One thread that runs everything posted to its context, in order.</summary>
    public sealed class SimulatedUnityMainThread : SynchronizationContext, IDisposable
    {
        private readonly BlockingCollection<KeyValuePair<SendOrPostCallback, object>> _queue =
            new BlockingCollection<KeyValuePair<SendOrPostCallback, object>>();
        private readonly Thread _thread;

        public SimulatedUnityMainThread()
        {
            _thread = new Thread(Pump) { IsBackground = true, Name = "SimulatedUnityMain" };
            _thread.Start();
        }

        public int ThreadId => _thread.ManagedThreadId;

        public bool IsMainThread => Thread.CurrentThread.ManagedThreadId == ThreadId;

        public override void Post(SendOrPostCallback d, object state)
        {
            _queue.Add(new KeyValuePair<SendOrPostCallback, object>(d, state));
        }

        public override void Send(SendOrPostCallback d, object state)
        {
            if (IsMainThread)
            {
                d(state);
                return;
            }
            using (var done = new ManualResetEventSlim())
            {
                Post(s => { try { d(s); } finally { done.Set(); } }, state);
                done.Wait();
            }
        }

        public override SynchronizationContext CreateCopy()
        {
            return this;
        }

        /// <summary>Start work on the main thread (as a MonoBehaviour's Start would) and observe its task from anywhere.</summary>
        public Task<T> Run<T>(Func<Task<T>> work)
        {
            var result = new TaskCompletionSource<T>();
            Post(_ =>
            {
                work().ContinueWith(t =>
                {
                    if (t.IsFaulted) result.TrySetException(t.Exception.InnerExceptions);
                    else if (t.IsCanceled) result.TrySetCanceled();
                    else result.TrySetResult(t.Result);
                }, TaskContinuationOptions.ExecuteSynchronously);
            }, null);
            return result.Task;
        }

        public void Dispose()
        {
            _queue.CompleteAdding();
        }

        private void Pump()
        {
            SetSynchronizationContext(this);
            foreach (KeyValuePair<SendOrPostCallback, object> item in _queue.GetConsumingEnumerable())
            {
                item.Key(item.Value);
            }
        }
    }

    /// <summary>On which threads a streamed turn's callbacks and continuation ran.</summary>
    public sealed class ThreadReport
    {
        public int OnMain { get; set; }
        public int OffMain { get; set; }
        public bool ResumedOnMain { get; set; }
        public bool TurnEndedAtDispose { get; set; }
        public List<string> Deltas { get; } = new List<string>();
        public List<string> Kinds { get; } = new List<string>();
        public AiTaskResult Result { get; set; }
        public string Joined => string.Concat(Deltas);
    }

    /// <summary>Streamed turns as a Unity script would start them.</summary>
    public static class MainThreadStreaming
    {
        /// <summary>StreamTaskAsync started on the main thread; runOnCallerContext false is the background opt-out.</summary>
        public static Task<ThreadReport> CallbacksAsync(SimulatedUnityMainThread main, AiOrchestrator orchestrator, AiTaskRequest request, bool runOnCallerContext)
        {
            return main.Run(async () =>
            {
                var report = new ThreadReport();
                var handlers = new AiTaskStreamHandlers
                {
                    RunOnCallerContext = runOnCallerContext,
                    OnTextDelta = d =>
                    {
                        lock (report)
                        {
                            if (main.IsMainThread) report.OnMain++; else report.OffMain++;
                            report.Deltas.Add(d);
                        }
                    },
                    OnCutReport = r => { lock (report) { if (main.IsMainThread) report.OnMain++; else report.OffMain++; } },
                };
                report.Result = await orchestrator.StreamTaskAsync(request, handlers);
                report.ResumedOnMain = main.IsMainThread;
                return report;
            });
        }

        /// <summary>A callback that throws on the main thread (a destroyed Text, say) ends the turn with that exception.</summary>
        public static Task<string> ThrowingCallbackAsync(SimulatedUnityMainThread main, AiOrchestrator orchestrator, AiTaskRequest request)
        {
            return main.Run(async () =>
            {
                try
                {
                    await orchestrator.StreamTaskAsync(request, d => { throw new InvalidOperationException("typewriter gone"); });
                    return "no exception";
                }
                catch (InvalidOperationException e)
                {
                    return e.Message + (main.IsMainThread ? " (main)" : " (off main)");
                }
            });
        }

        /// <summary>The async-enumerable pattern called member by member, as `await foreach` compiles to.</summary>
        public static Task<ThreadReport> EnumerateAsync(SimulatedUnityMainThread main, AiOrchestrator orchestrator, AiTaskRequest request, int stopAfter)
        {
            return main.Run(async () =>
            {
                var report = new ThreadReport();
                AiTaskStream stream = orchestrator.StreamTask(request);
                AiTaskStreamEnumerator e = stream.GetAsyncEnumerator();
                try
                {
                    while (await e.MoveNextAsync())
                    {
                        if (main.IsMainThread) report.OnMain++; else report.OffMain++;
                        report.Kinds.Add(e.Current.Kind.ToString());
                        if (e.Current.Kind == AiTaskStreamItemKind.TextDelta) report.Deltas.Add(e.Current.Text);
                        if (report.Deltas.Count == stopAfter) break;
                    }
                }
                finally
                {
                    await e.DisposeAsync();
                }
                report.TurnEndedAtDispose = stream.Result.IsCompleted;
                report.ResumedOnMain = main.IsMainThread;
                if (stopAfter < 0) report.Result = await stream.Result;
                return report;
            });
        }
    }
}
