// Game code of the Unity-layer tests: a game tool that records where and whether it ran, and turns started the ways
// game code starts them (on the main thread, or from the thread pool after a ConfigureAwait(false)).
using System;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using UnityEngine;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>What the smith sells (an enum: the forced call's grammar keeps the tiny model's arguments short).</summary>
    public enum Ware
    {
        Sword,
        Axe,
    }

    /// <summary>The tool's arguments.</summary>
    [UnityEngine.Scripting.Preserve]
    public sealed class WareArgs
    {
        /// <summary>The ware.</summary>
        public Ware Item;
    }

    /// <summary>A quote_price tool that counts its calls and where they ran.</summary>
    public sealed class ToolProbe
    {
        private int calls;
        private int onMain;
        private int offMain;
        private int playingWhenRun;

        /// <summary>Handler runs.</summary>
        public int Calls => Volatile.Read(ref calls);

        /// <summary>Runs on Unity's main thread.</summary>
        public int OnMain => Volatile.Read(ref onMain);

        /// <summary>Runs elsewhere.</summary>
        public int OffMain => Volatile.Read(ref offMain);

        /// <summary>Runs that found Application.isPlaying true (read on the main thread only).</summary>
        public int PlayingWhenRun => Volatile.Read(ref playingWhenRun);

        /// <summary>Registers `role` with the tool in `policy`; the request forces the call.</summary>
        public AiTaskRequest Register(AgentMemoryPolicy policy, string role, bool runOnMainThread)
        {
            new AgentBuilder(role, policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<WareArgs>("quote_price", "The price in gold of a ware.", args =>
                {
                    Interlocked.Increment(ref calls);
                    if (StubEngine.IsMainThread)
                    {
                        Interlocked.Increment(ref onMain);
                        if (Application.isPlaying) Interlocked.Increment(ref playingWhenRun);
                    }
                    else
                    {
                        Interlocked.Increment(ref offMain);
                    }
                    return Task.FromResult("30 gold");
                }, runOnMainThread)
                .Build();
            return new AiTaskRequest { RoleId = role, Hint = "How much is a sword?", ForcedToolName = "quote_price" };
        }

        /// <summary>The turn started from the thread pool: no SynchronizationContext (game code after ConfigureAwait(false)).</summary>
        public static Task<AiTaskResult> StartFromThreadPool(AiOrchestrator orchestrator, AiTaskRequest request)
        {
            return Task.Run(() => orchestrator.RunTaskWithResultAsync(request));
        }

        /// <summary>The turn started on the calling thread (the main thread: its context is Unity's).</summary>
        public static Task<AiTaskResult> StartHere(AiOrchestrator orchestrator, AiTaskRequest request)
        {
            return orchestrator.RunTaskWithResultAsync(request);
        }
    }

    /// <summary>A tool handler that waits (off the main thread) until its turn is cancelled.</summary>
    public sealed class BlockingTool
    {
        private readonly TaskCompletionSource<bool> started = new TaskCompletionSource<bool>();
        private readonly TaskCompletionSource<bool> cancelled = new TaskCompletionSource<bool>();

        /// <summary>Completes when the handler runs.</summary>
        public Task Started => started.Task;

        /// <summary>Completes when the handler saw its token cancelled.</summary>
        public Task Cancelled => cancelled.Task;

        /// <summary>Registers `role` with the blocking tool; the request forces the call.</summary>
        public AiTaskRequest Register(AgentMemoryPolicy policy, string role)
        {
            new AgentBuilder(role, policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<WareArgs>("quote_price", "The price in gold of a ware.", async (args, token) =>
                {
                    started.TrySetResult(true);
                    try
                    {
                        await Task.Delay(Timeout.Infinite, token);
                    }
                    catch (OperationCanceledException)
                    {
                        cancelled.TrySetResult(true);
                        throw;
                    }
                    return ToolResult.Ok("never");
                }, runOnMainThread: false)
                .Build();
            return new AiTaskRequest { RoleId = role, Hint = "How much is a sword?", ForcedToolName = "quote_price" };
        }
    }
}
