// A game learning when memory changed: the pending flag, awaiting the write, the MemoryChanged event on the
// main thread, and the write in the call or at the end of a stream.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using CoreAI.Ai;

namespace CoreAI.Tests
{
    public sealed class MemoryWriteReport
    {
        public AiTaskResult Turn;
        public AiMemoryWrite Awaited;
        public AiMemoryWrite Changed;
        public bool ChangedOnMain;
        public AiTaskResult Question;
        public AiMemoryWrite QuestionWrite;
        public AiTaskResult WaitedTurn;
        public AiTaskResult StreamedTurn;
        public List<AiMemoryWrite> StreamedWrites = new List<AiMemoryWrite>();
        public bool StreamedWriteOnMain;
        public List<string> ItemKinds = new List<string>();
        public IReadOnlyList<AiMemoryWrite> ConversationWrites;
        public int Events;
    }

    public static class MemoryWriteScenarios
    {
        private static AiTaskRequest Request(string role, string hint, bool wait)
        {
            return new AiTaskRequest { RoleId = role, Hint = hint, MaxOutputTokens = 16, WaitForMemoryWrite = wait };
        }

        public static Task<MemoryWriteReport> RunAsync(SimulatedUnityMainThread main, AiOrchestrator orchestrator, string role)
        {
            return main.Run(async () =>
            {
                var report = new MemoryWriteReport();
                var changed = new TaskCompletionSource<AiMemoryWrite>();
                orchestrator.MemoryChanged += w =>
                {
                    report.Events++;
                    if (changed.TrySetResult(w)) report.ChangedOnMain = main.IsMainThread;
                };

                report.Turn = await orchestrator.RunTaskWithResultAsync(Request(role, "My name is Tobin.", false));
                report.Awaited = await orchestrator.WaitForMemoryWriteAsync(report.Turn);
                Task first = await Task.WhenAny(changed.Task, Task.Delay(TimeSpan.FromSeconds(60)));
                report.Changed = first == changed.Task ? changed.Task.Result : null;

                report.Question = await orchestrator.RunTaskWithResultAsync(Request(role, "Where is the smithy?", false));
                report.QuestionWrite = await orchestrator.WaitForMemoryWriteAsync(report.Question);

                report.WaitedTurn = await orchestrator.RunTaskWithResultAsync(Request(role, "I owe you 25 gold.", true));

                var handlers = new AiTaskStreamHandlers
                {
                    OnMemoryWrite = w =>
                    {
                        report.StreamedWrites.Add(w);
                        report.StreamedWriteOnMain = main.IsMainThread;
                    },
                };
                report.StreamedTurn = await orchestrator.StreamTaskAsync(Request(role, "My horse is called Clover.", true), handlers);

                AiTaskStreamEnumerator items = orchestrator.StreamTask(Request(role, "I love apples.", true)).GetAsyncEnumerator();
                try
                {
                    while (await items.MoveNextAsync()) report.ItemKinds.Add(items.Current.Kind.ToString());
                }
                finally
                {
                    await items.DisposeAsync();
                }

                await orchestrator.RunTaskWithResultAsync(Request(role, "I am a smith too.", false));
                report.ConversationWrites = await orchestrator.WaitForMemoryWritesAsync(role);
                return report;
            });
        }
    }
}
