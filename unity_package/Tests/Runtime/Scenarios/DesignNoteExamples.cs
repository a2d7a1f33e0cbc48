// The examples of the design note (seed-MemorySystem.txt), written exactly as a game would, run from pytest.
using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Tests
{
    /// <summary>What an example did, for the Python side to check.</summary>
    public sealed class ExampleOutcome
    {
        public List<AiTaskResult> Turns { get; } = new List<AiTaskResult>();
        public AgentMemoryPolicy Policy { get; set; }
        public AgentConfig Config { get; set; }
        public List<AgentConfig> Configs { get; } = new List<AgentConfig>();
        public MemoryToolResult ToolResult { get; set; }
        public AgentMemoryState State { get; set; }
    }

    /// <summary>Examples 1-3 and the recommended opt-ins of the design note.</summary>
    public static class DesignNoteExamples
    {
        /// <summary>Example 1: CoreMechanicAI - craft history (MemoryTool).</summary>
        public static async Task<ExampleOutcome> Example1Async(string url, string token)
        {
            var outcome = new ExampleOutcome();
            // Setup
            AgentMemoryPolicy policy = new AgentMemoryPolicy();
            policy.ConfigureRole("CoreMechanicAI",
                useMemoryTool: true,
                defaultAction: MemoryToolAction.Append);
            outcome.Policy = policy;
            // Test harness only: the tiny random model would otherwise write up to the context's end each round.
            policy.SetMaxOutputTokens("CoreMechanicAI", 48);

            using (var runtime = new CoreAIRuntimeClient(url, token, policy))
            {
                AiOrchestrator orchestrator = runtime.CreateOrchestrator();
                // Model request
                outcome.Turns.Add(await orchestrator.RunTaskWithResultAsync(new AiTaskRequest
                {
                    RoleId = "CoreMechanicAI",
                    Hint = "Craft a weapon from Iron + Fire Crystal and remember the result with the memory tool."
                }));

                // The model's call {"name":"memory","arguments":{"action":"append","content":"Craft#1: Iron Fireblade damage:45 fire:15"}}
                // made through the same tool the model uses:
                RuntimeAgentMemoryStore store = runtime.CreateMemoryStore();
                outcome.ToolResult = await store.ExecuteMemoryToolJsonAsync("CoreMechanicAI",
                    "{\"action\":\"append\",\"content\":\"Craft#1: Iron Fireblade damage:45 fire:15\"}");
                AgentMemoryState state;
                store.TryLoad("CoreMechanicAI", out state);
                outcome.State = state;

                // On the next request the model sees this memory in the request tail.
                outcome.Turns.Add(await orchestrator.RunTaskWithResultAsync(new AiTaskRequest { RoleId = "CoreMechanicAI", Hint = "What did we craft?" }));
            }
            return outcome;
        }

        /// <summary>Example 2: PlainChat - dialogue context (ChatHistory); MyChat is registered in the default policy.</summary>
        public static async Task<ExampleOutcome> Example2Async(string url, string token)
        {
            var outcome = new ExampleOutcome();
            // Works on every backend. PlainChat already has history on (and persisted);
            // for a custom role, opt in explicitly:
            AgentConfig chat = new AgentBuilder("MyChat")
                .WithChatHistory(4096, persistBetweenSessions: true)  // <- Type 2
                .Build();
            outcome.Config = chat;

            using (var runtime = new CoreAIRuntimeClient(url, token))
            {
                AiOrchestrator orchestrator = runtime.CreateOrchestrator();
                // Dialogue 1
                outcome.Turns.Add(await orchestrator.RunTaskWithResultAsync(new AiTaskRequest
                {
                    RoleId = "PlainChat",
                    Hint = "My name is Alex"
                }));
                // Dialogue 2 - the model sees the recent history
                outcome.Turns.Add(await orchestrator.RunTaskWithResultAsync(new AiTaskRequest
                {
                    RoleId = "PlainChat",
                    Hint = "What is my name?"
                }));
                // MyChat reaches the runtime on its next call, or now:
                await runtime.SyncPolicyAsync();
            }
            return outcome;
        }

        /// <summary>Example 3: disable memory for a role, then for all built-in roles; pushed to the runtime.</summary>
        public static async Task<ExampleOutcome> Example3Async(string url, string token)
        {
            var outcome = new ExampleOutcome();
            AgentMemoryPolicy policy = new AgentMemoryPolicy();
            policy.DisableMemoryTool("Merchant");    // PlainChat already has MemoryTool disabled by default
            policy.SetMemoryToolForAll(false);        // Disable for ALL (ChatHistory only)
            outcome.Policy = policy;
            using (var runtime = new CoreAIRuntimeClient(url, token, policy))
            {
                await runtime.SyncPolicyAsync();
            }
            return outcome;
        }

        /// <summary>The recommended opt-ins (Creator, BlacksmithNPC, AnalyzerChat) built into policy.</summary>
        public static ExampleOutcome RecommendedOptIns(AgentMemoryPolicy policy)
        {
            var outcome = new ExampleOutcome { Policy = policy };
            // Interactive creator/designer assistant: keep the working conversation for the current design session.
            outcome.Configs.Add(new AgentBuilder("Creator", policy)
                .WithMemory(MemoryToolAction.Write)
                .WithChatHistory(4096, persistBetweenSessions: false)
                .Build());

            // Named story NPC: preserve conversation and relationship across restarts.
            outcome.Configs.Add(new AgentBuilder("BlacksmithNPC", policy)
                .WithMemory(MemoryToolAction.Append)
                .WithChatHistory(4096, persistBetweenSessions: true)
                .Build());

            // Analyzer dashboard chat: use history only if a human is discussing the report with the analyzer.
            outcome.Configs.Add(new AgentBuilder("AnalyzerChat", policy)
                .WithMemory(MemoryToolAction.Append)
                .WithChatHistory(4096, persistBetweenSessions: false)
                .Build());
            return outcome;
        }
    }

    /// <summary>A streamed turn as the game saw it: every delta in order, and the final result.</summary>
    public sealed class StreamRecording
    {
        public List<string> Deltas { get; } = new List<string>();
        public List<AiToolCall> ToolCalls { get; } = new List<AiToolCall>();
        public int CutReports { get; set; }
        public AiTaskResult Result { get; set; }
        public string Joined => string.Concat(Deltas);

        /// <summary>Stream one turn, recording the callbacks (a typewriter would append each delta).</summary>
        public static async Task<StreamRecording> RecordAsync(AiOrchestrator orchestrator, AiTaskRequest request, CancellationToken cancellationToken)
        {
            var recording = new StreamRecording();
            var handlers = new AiTaskStreamHandlers
            {
                OnTextDelta = d => { lock (recording) recording.Deltas.Add(d); },
                OnToolCall = c => { lock (recording) recording.ToolCalls.Add(c); },
                OnCutReport = r => { lock (recording) recording.CutReports++; },
            };
            recording.Result = await orchestrator.StreamTaskAsync(request, handlers, cancellationToken);
            return recording;
        }

        /// <summary>Stream with the Action&lt;string&gt; overload; cancel after the first delta.</summary>
        public static async Task<StreamRecording> CancelAfterFirstDeltaAsync(AiOrchestrator orchestrator, AiTaskRequest request)
        {
            var recording = new StreamRecording();
            using (var cts = new CancellationTokenSource())
            {
                try
                {
                    recording.Result = await orchestrator.StreamTaskAsync(request, d =>
                    {
                        lock (recording) recording.Deltas.Add(d);
                        cts.Cancel();
                    }, cts.Token);
                }
                catch (OperationCanceledException)
                {
                    recording.Result = null;
                }
            }
            return recording;
        }
    }

    /// <summary>A scope provider whose player can change between calls (a server hosting several players).</summary>
    public sealed class SwitchablePlayerScope : IAgentMemoryScopeProvider
    {
        public string UserId { get; set; } = "";

        public AgentMemoryScope GetScope(string roleId)
        {
            return new AgentMemoryScope("game", UserId, "slot-1", "");
        }
    }
}
