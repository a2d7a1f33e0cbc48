// Code written against the design note's original API (positional ConfigureRole, SetMaxOutputTokens(role, 0),
// string RunTaskAsync, bool Revert, enum ForcedToolMode, contextWindowTokens:), compiled unchanged and run from pytest.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Tests
{
    /// <summary>What the original-style code saw, for the Python side to check.</summary>
    public sealed class OriginalApiOutcome
    {
        public AgentMemoryPolicy Policy { get; set; }
        public string Reply { get; set; }
        public string DuplicateCallsError { get; set; }
        public bool Reverted { get; set; }
        public bool RevertedUnknown { get; set; }
        public string RevertError { get; set; }
        public string MemoryAfterRevert { get; set; }
        public int VersionCount { get; set; }
        public bool LoadedAfterClear { get; set; }
        public List<string> History { get; } = new List<string>();
        public int HistoryAfterClear { get; set; }
    }

    /// <summary>Every member of the original API, in the original style.</summary>
    public static class OriginalApi
    {
        /// <summary>Policy, builder, a turn, the store and versions, as a game written for the design note does them.</summary>
        public static async Task<OriginalApiOutcome> RunAsync(string url, string token)
        {
            var outcome = new OriginalApiOutcome();
            AgentMemoryPolicy policy = new AgentMemoryPolicy();
            outcome.Policy = policy;

            // The 4th positional parameter is allowDuplicateToolCalls (false: the runtime's behaviour), never withChatHistory.
            policy.ConfigureRole("Merchant", true, MemoryToolAction.Write, false);
            try
            {
                policy.ConfigureRole("Builder", true, MemoryToolAction.Append, true);
            }
            catch (NotSupportedException e)
            {
                outcome.DuplicateCallsError = e.Message;
            }
            policy.ConfigureRole("CoreMechanicAI", useMemoryTool: true, defaultAction: MemoryToolAction.Append);
            policy.ConfigureRole("Analyzer", contextWindowTokens: 512);
            policy.ConfigureChatHistory("AINpc", true, 1024, false, 12);
            policy.ConfigureChatHistory("SmartChat", enabled: true, contextWindowTokens: 2048, persist: true);
            policy.ConfigureLlmContextCompaction("Creator", false);
            policy.DisableMemoryTool("PlainChat");
            policy.EnableMemoryTool("Merchant");
            policy.SetMaxOutputTokens("Creator", 64);
            policy.SetMaxOutputTokens("Creator", 0);  // 0 = unlimited
            policy.SetMaxOutputTokens("Smith", 24);

            new AgentBuilder("Smith", policy)
                .WithMemory(MemoryToolAction.Append)
                .WithChatHistory(contextWindowTokens: 2048, persistBetweenSessions: true)
                .WithMaxOutputTokens(24)
                .Build();
            new AgentBuilder("Bard", policy).WithChatHistory(4096, persistBetweenSessions: false).WithMaxOutputTokens(0).Build();

            using (var runtime = new CoreAIRuntimeClient(url, token, policy))
            {
                AiOrchestrator orchestrator = runtime.CreateOrchestrator();
                string reply = await orchestrator.RunTaskAsync(new AiTaskRequest
                {
                    RoleId = "Smith",
                    Hint = "Forge me a sword",
                    ForcedToolMode = ForcedToolMode.None,
                });
                outcome.Reply = reply;

                IAgentMemoryStore store = runtime.CreateMemoryStore();
                // Versions come from the memory tool, as when the model writes (the harness calls it directly).
                ((RuntimeAgentMemoryStore)store).ExecuteMemoryTool("Smith", MemoryToolCall.Write("first"));
                ((RuntimeAgentMemoryStore)store).ExecuteMemoryTool("Smith", MemoryToolCall.Write("second"));
                AgentMemoryState loaded;
                if (store.TryLoad("Smith", out loaded))
                {
                    store.Save("Smith", loaded);
                }
                IReadOnlyList<AgentMemoryVersion> versions = store.ListVersions("Smith");
                outcome.VersionCount = versions.Count;
                outcome.Reverted = versions.Count > 0 && store.Revert("Smith", versions[0].Version);
                string error;
                outcome.RevertedUnknown = store.Revert("Smith", 999, out error);
                outcome.RevertError = error;
                store.TryLoad("Smith", out loaded);
                outcome.MemoryAfterRevert = loaded.Memory;

                store.AppendChatMessage("Smith", "user", "hello");
                store.AppendChatMessage("Smith", "assistant", "welcome", persistToDisk: false);
                foreach (ChatMessage m in store.GetChatHistory("Smith", 30))
                {
                    outcome.History.Add(m.Role + ":" + m.Content);
                }
                store.ClearChatHistory("Smith");
                outcome.HistoryAfterClear = store.GetChatHistory("Smith").Length;
                store.Clear("Smith");
                AgentMemoryState gone;
                outcome.LoadedAfterClear = store.TryLoad("Smith", out gone);
            }
            return outcome;
        }
    }
}
