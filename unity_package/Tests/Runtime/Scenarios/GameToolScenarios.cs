// Game tools declared with AgentBuilder.WithTool and run by the compiled package against a real runtime.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Tests
{
    public enum Metal
    {
        Iron,
        Steel,
    }

    /// <summary>The arguments of the test's price tool (an enum: the tiny model's free strings never end).</summary>
    public sealed class PriceArgs
    {
        [ToolParameter("The metal to price.")]
        public Metal Item;
    }

    /// <summary>Every supported kind of argument, for the schema test.</summary>
    public sealed class SchemaArgs
    {
        [ToolParameter("Who buys.")]
        public string Buyer;
        public int Count;
        public double Weight;
        public bool Rush;
        public Metal Metal;
        public int? Discount;
        [ToolParameter("A note for the smith.", Optional = true)]
        public string Note { get; set; }
        public readonly int Ignored = 0;
        public int ReadOnly { get { return 1; } }
    }

    public sealed class UnsupportedArgs
    {
        public List<string> Items;
    }

    public sealed class GameToolReport
    {
        public AiTaskResult Result;
        public readonly List<string> Seen = new List<string>();
        public int OnMain;
        public int OffMain;
    }

    public static class GameToolScenarios
    {
        public static string SchemaOf()
        {
            return ToolSchema.For(typeof(SchemaArgs));
        }

        public static string UnsupportedSchema()
        {
            try
            {
                ToolSchema.For(typeof(UnsupportedArgs));
                return "";
            }
            catch (NotSupportedException e)
            {
                return e.Message;
            }
        }

        /// <summary>A turn of a role with a price tool, started on the simulated main thread (forced call).</summary>
        public static Task<GameToolReport> RoundTripAsync(SimulatedUnityMainThread main, CoreAIRuntimeClient client, bool failing)
        {
            var report = new GameToolReport();
            new AgentBuilder("Smith", client.Policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<PriceArgs>("quote_price", "Price of a metal in gold, from the game's table.", args =>
                {
                    if (main.IsMainThread) report.OnMain++; else report.OffMain++;
                    if (failing) throw new InvalidOperationException("the price list is missing");
                    report.Seen.Add(args.Item.ToString());
                    return Task.FromResult(args.Item == Metal.Steel ? "45 gold" : "30 gold");
                })
                .Build();
            var request = new AiTaskRequest { RoleId = "Smith", Hint = "How much?", ForcedToolName = "quote_price" };
            AiOrchestrator orchestrator = client.CreateOrchestrator();
            return main.Run(async () =>
            {
                report.Result = await orchestrator.RunTaskWithResultAsync(request);
                return report;
            });
        }

        /// <summary>The price tool in a turn consumed as an async stream (what await foreach compiles to) on the main thread.</summary>
        public static Task<GameToolReport> EnumeratedAsync(SimulatedUnityMainThread main, CoreAIRuntimeClient client)
        {
            var report = new GameToolReport();
            new AgentBuilder("Smith4", client.Policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<PriceArgs>("quote_price", "Price of a metal in gold.", args =>
                {
                    if (main.IsMainThread) report.OnMain++; else report.OffMain++;
                    report.Seen.Add(args.Item.ToString());
                    return Task.FromResult("30 gold");
                })
                .Build();
            var request = new AiTaskRequest { RoleId = "Smith4", Hint = "How much?", ForcedToolName = "quote_price" };
            AiOrchestrator orchestrator = client.CreateOrchestrator();
            return main.Run(async () =>
            {
                AiTaskStream stream = orchestrator.StreamTask(request);
                AiTaskStreamEnumerator items = stream.GetAsyncEnumerator();
                try
                {
                    while (await items.MoveNextAsync())
                    {
                        if (items.Current.Kind == AiTaskStreamItemKind.ToolResult) report.Seen.Add("result:" + items.Current.ToolResult.Content);
                    }
                }
                finally
                {
                    await items.DisposeAsync();
                }
                report.Result = await stream.Result;
                return report;
            });
        }

        /// <summary>Cancel the turn while its handler runs: (how the turn ended, whether the handler saw the cancellation).</summary>
        public static async Task<string> CancelMidCallAsync(CoreAIRuntimeClient client)
        {
            var started = new TaskCompletionSource<bool>();
            var observed = new TaskCompletionSource<bool>();
            new AgentBuilder("Smith3", client.Policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<PriceArgs>("quote_price", "Price of a metal in gold.", async (args, token) =>
                {
                    started.TrySetResult(true);
                    try
                    {
                        await Task.Delay(Timeout.Infinite, token);
                    }
                    catch (OperationCanceledException)
                    {
                        observed.TrySetResult(true);
                        throw;
                    }
                    return ToolResult.Ok("never");
                }, runOnMainThread: false)
                .Build();
            var request = new AiTaskRequest { RoleId = "Smith3", Hint = "How much?", ForcedToolName = "quote_price" };
            var cancel = new CancellationTokenSource();
            Task<AiTaskResult> turn = client.CreateOrchestrator().RunTaskWithResultAsync(request, cancel.Token);
            await started.Task;
            cancel.Cancel();
            string outcome;
            try
            {
                AiTaskResult result = await turn;
                outcome = "result " + result.Status;
            }
            catch (OperationCanceledException)
            {
                outcome = "cancelled";
            }
            catch (Exception e)
            {
                outcome = e.GetType().Name;
            }
            bool seen = await Task.WhenAny(observed.Task, Task.Delay(60000)) == observed.Task;
            return outcome + (seen ? " / handler cancelled" : " / handler not cancelled");
        }

        /// <summary>The same with the ToolResult form, off the main thread, reporting a failure itself.</summary>
        public static Task<AiTaskResult> ResultFormAsync(CoreAIRuntimeClient client)
        {
            new AgentBuilder("Smith2", client.Policy)
                .WithoutMemory()
                .WithMaxToolCallRoundtrips(1)
                .WithMaxOutputTokens(16)
                .WithTool<PriceArgs>("quote_price", "Price of a metal in gold.",
                    (args, token) => Task.FromResult(ToolResult.Fail("out of " + args.Item)), runOnMainThread: false)
                .Build();
            var request = new AiTaskRequest { RoleId = "Smith2", Hint = "How much?", ForcedToolName = "quote_price" };
            return client.CreateOrchestrator().RunTaskWithResultAsync(request);
        }
    }
}
