using System;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Launcher;
using CoreAI.Runtime;
using CoreAI.UnityIntegration;
using UnityEngine;

namespace CoreAI.Samples.BlacksmithNpc
{
    /// <summary>
    /// A blacksmith NPC who remembers the player across sessions: the memory tool keeps compact facts
    /// (name, orders, debts) and the chat history is persisted, so after a restart Brom still knows you.
    /// Put it next to a CoreAIRuntimeBootstrap; type in the box and press Say.
    /// </summary>
    [AddComponentMenu("CoreAI/Samples/Blacksmith NPC")]
    public sealed class BlacksmithNpc : MonoBehaviour
    {
        /// <summary>The role id of the blacksmith.</summary>
        public const string RoleId = "BlacksmithNPC";

        /// <summary>The blacksmith's character (the cacheable system prompt: nothing per-player here).</summary>
        public const string SystemPrompt =
            "You are Brom, the village blacksmith: gruff, warm, proud of your steel. Answer in one or two sentences. "
            + "Use the memory tool to remember the player's name, what they ordered or bought, and what they owe; "
            + "greet returning customers by name.";

        [Tooltip("The bootstrap that starts the CoreAI runtime (found in the scene when empty).")]
        [SerializeField] private CoreAIRuntimeBootstrap bootstrap;

        private CoreAIRuntimeClient client;
        private AiOrchestrator orchestrator;
        private string input = "Hello! I'm Alex. Can you forge me a sword?";
        private string reply = "(the forge is warming up …)";
        private bool waiting;

        /// <summary>The blacksmith's agent configuration, registered in `policy`.</summary>
        public static AgentConfig BuildAgent(AgentMemoryPolicy policy)
        {
            return new AgentBuilder(RoleId, policy)
                .WithMemory(MemoryToolAction.Append)
                .WithChatHistory(4096, persistBetweenSessions: true)
                .WithSystemPrompt(SystemPrompt)
                .Build();
        }

        /// <summary>The blacksmith's reply to one line of the player.</summary>
        public async Task<string> SayAsync(string line)
        {
            if (orchestrator == null) return "(the runtime is not ready yet)";
            AiTaskResult result = await orchestrator.RunTaskWithResultAsync(new AiTaskRequest { RoleId = RoleId, Hint = line });
            return result.Succeeded ? result.Text : "(Brom scratches his head: " + result.Status + ")";
        }

        private void Awake()
        {
            BuildAgent(AgentMemoryPolicy.Default);
        }

        private void OnEnable()
        {
            if (bootstrap == null) bootstrap = CoreAIRuntimeBootstrap.Instance;
            if (bootstrap == null)
            {
                reply = "(add a CoreAIRuntimeBootstrap to the scene)";
                return;
            }
            bootstrap.RuntimeReady += OnRuntimeReady;
            if (bootstrap.IsReady) OnRuntimeReady(bootstrap.Endpoint);
        }

        private void OnDisable()
        {
            if (bootstrap != null) bootstrap.RuntimeReady -= OnRuntimeReady;
            if (client != null) client.Dispose();
            client = null;
            orchestrator = null;
        }

        private void OnRuntimeReady(RuntimeEndpoint endpoint)
        {
            if (client != null) client.Dispose();
            client = bootstrap.CreateClient(AgentMemoryPolicy.Default);
            orchestrator = client.CreateOrchestrator();
            reply = "(Brom looks up from the anvil)";
        }

        private void OnGUI()
        {
            GUILayout.BeginArea(new Rect(10, 10, 480, 220));
            GUILayout.Label("Brom the blacksmith: " + reply);
            input = GUILayout.TextField(input ?? "");
            GUI.enabled = orchestrator != null && !waiting;
            if (GUILayout.Button("Say")) _ = AskAsync(input);
            GUI.enabled = true;
            GUILayout.EndArea();
        }

        // Returns a Task, not void: an exception escaping a void async method would tear the app down.
        private async Task AskAsync(string line)
        {
            waiting = true;
            try
            {
                reply = await SayAsync(line);
            }
            catch (CoreAIRuntimeException e)
            {
                reply = "(the runtime failed: " + e.Code + ")";
                CoreAILog.Warning("the blacksmith's turn failed: " + e.Code);
            }
            catch (Exception e)
            {
                reply = "(something went wrong)";
                CoreAILog.Warning("the blacksmith's turn failed: " + e.GetType().Name);
            }
            finally
            {
                waiting = false;
            }
        }
    }
}
