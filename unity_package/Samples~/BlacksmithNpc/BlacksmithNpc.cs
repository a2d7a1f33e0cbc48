using System;
using System.Threading;
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
    /// <remarks>
    /// Every turn carries a token tied to this component's lifetime: disabling or destroying the NPC (Stop, a scene
    /// change) cancels the turn it is waiting for, so no reply lands on an NPC that is gone.
    /// </remarks>
    [AddComponentMenu("CoreAI/Samples/Blacksmith NPC")]
    public sealed class BlacksmithNpc : MonoBehaviour
    {
        /// <summary>The role id of the blacksmith.</summary>
        public const string RoleId = "BlacksmithNPC";

        /// <summary>The blacksmith's character (the cacheable system prompt: nothing per-player here).</summary>
        public const string SystemPrompt =
            "You are Brom, the village blacksmith: gruff, warm, proud of your steel. Answer in one or two sentences. "
            + "Use the memory tool to remember the player's name, what they ordered or bought, and what they owe; "
            + "greet returning customers by name. Quote prices only with quote_price, and when the player buys, "
            + "hand the item over with give_item and remember the purchase with the memory tool.";

        [Tooltip("The bootstrap that starts the CoreAI runtime (found in the scene when empty).")]
        [SerializeField] private CoreAIRuntimeBootstrap bootstrap;

        private CoreAIRuntimeClient client;
        private AiOrchestrator orchestrator;
        private string input = "Hello! I'm Alex. Can you forge me a sword?";
        private string reply = "(the forge is warming up …)";
        private bool waiting;
        private CancellationTokenSource lifetime;  // enabled → disabled: every turn of this NPC ends with it

        /// <summary>The game's shop state the tools act on.</summary>
        public BlacksmithShop Shop { get; } = new BlacksmithShop();

        /// <summary>What Brom said last (or what keeps him from answering).</summary>
        public string Reply => reply;

        /// <summary>The turn the NPC is waiting for (null before the first); it ends when the NPC is disabled.</summary>
        public Task CurrentTurn { get; private set; }

        /// <summary>The blacksmith's agent configuration, registered in `policy`, with game tools acting on shop.</summary>
        /// <remarks>The tools' handlers run on the main thread (the default), so they could as well touch the scene.</remarks>
        public static AgentConfig BuildAgent(AgentMemoryPolicy policy, BlacksmithShop shop)
        {
            return new AgentBuilder(RoleId, policy)
                .WithMemory(MemoryToolAction.Append)
                .WithChatHistory(4096, persistBetweenSessions: true)
                .WithSystemPrompt(SystemPrompt)
                .WithTool<WareArgs>("quote_price", "The price in gold of an item Brom sells, from the shop's price table.",
                    args => Task.FromResult(shop.QuotePrice(args.Item)))
                .WithTool<WareArgs>("give_item", "Hand an item the player has bought to the player.",
                    args => Task.FromResult(shop.GiveItem(args.Item)))
                .Build();
        }

        /// <summary>The blacksmith's reply to one line of the player; cancelling the token ends the turn.</summary>
        public async Task<string> SayAsync(string line, CancellationToken cancellationToken)
        {
            if (orchestrator == null) return "(the runtime is not ready yet)";
            AiTaskResult result = await orchestrator.RunTaskWithResultAsync(
                new AiTaskRequest { RoleId = RoleId, Hint = line }, cancellationToken);
            return result.Completed ? result.Text : "(Brom scratches his head: " + result.Status + ")";
        }

        /// <summary>What the Say button does: a turn for `line` that lives as long as this NPC is enabled.</summary>
        public Task Ask(string line)
        {
            if (lifetime == null) return Task.CompletedTask;  // disabled: nobody to answer
            CurrentTurn = AskAsync(line, lifetime.Token);
            return CurrentTurn;
        }

        private void Awake()
        {
            BuildAgent(AgentMemoryPolicy.Default, Shop);
        }

        private void OnEnable()
        {
            lifetime = new CancellationTokenSource();
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
            EndTurns();
            if (bootstrap != null) bootstrap.RuntimeReady -= OnRuntimeReady;
            if (client != null) client.Dispose();
            client = null;
            orchestrator = null;
        }

        private void OnDestroy()
        {
            EndTurns();  // Unity disables before it destroys; this keeps it so if that ever changes
        }

        private void EndTurns()
        {
            if (lifetime == null) return;
            lifetime.Cancel();
            lifetime.Dispose();
            lifetime = null;
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
            if (GUILayout.Button("Say")) Ask(input);
            GUI.enabled = true;
            GUILayout.EndArea();
        }

        // Returns a Task, not void: an exception escaping a void async method would tear the app down.
        private async Task AskAsync(string line, CancellationToken cancellationToken)
        {
            waiting = true;
            try
            {
                string answer = await SayAsync(line, cancellationToken);
                if (!cancellationToken.IsCancellationRequested) reply = answer;
            }
            catch (OperationCanceledException)
            {
                // Play Mode ended (or the NPC was disabled) while Brom was thinking: nothing to show any more.
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
