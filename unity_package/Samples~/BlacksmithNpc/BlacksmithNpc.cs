using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Launcher;
using CoreAI.Runtime;
using CoreAI.UnityIntegration;
using UnityEngine;

namespace CoreAI.Samples.BlacksmithNpc
{
    /// <summary>What Brom sells.</summary>
    public enum Ware
    {
        Sword,
        Axe,
        Horseshoe,
    }

    /// <summary>The arguments of Brom's game tools.</summary>
    /// <remarks>[Preserve]: Newtonsoft fills it by reflection, which IL2CPP's stripping (Medium/High) cannot see.</remarks>
    [UnityEngine.Scripting.Preserve]
    public sealed class WareArgs
    {
        [ToolParameter("The item, one of the wares Brom sells.")]
        public Ware Item;
    }

    /// <summary>The game's side of the shop: its own price table and the player's bag (plain C#, no scene needed).</summary>
    public sealed class BlacksmithShop
    {
        /// <summary>Prices in gold: the game's table, never the model's guess.</summary>
        public static readonly IReadOnlyDictionary<Ware, int> Prices = new Dictionary<Ware, int>
        {
            { Ware.Sword, 30 },
            { Ware.Axe, 22 },
            { Ware.Horseshoe, 3 },
        };

        /// <summary>What the player was handed, in order.</summary>
        public List<Ware> Bag { get; } = new List<Ware>();

        /// <summary>The quote_price tool: the price from the table.</summary>
        public string QuotePrice(Ware item)
        {
            return "{\"item\": \"" + item + "\", \"gold\": " + Prices[item] + "}";
        }

        /// <summary>The give_item tool: the item goes into the player's bag.</summary>
        public string GiveItem(Ware item)
        {
            Bag.Add(item);
            return "{\"handed_over\": \"" + item + "\"}";
        }
    }

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
            + "greet returning customers by name. Quote prices only with quote_price, and when the player buys, "
            + "hand the item over with give_item and remember the purchase with the memory tool.";

        [Tooltip("The bootstrap that starts the CoreAI runtime (found in the scene when empty).")]
        [SerializeField] private CoreAIRuntimeBootstrap bootstrap;

        private CoreAIRuntimeClient client;
        private AiOrchestrator orchestrator;
        private string input = "Hello! I'm Alex. Can you forge me a sword?";
        private string reply = "(the forge is warming up …)";
        private bool waiting;

        /// <summary>The game's shop state the tools act on.</summary>
        public BlacksmithShop Shop { get; } = new BlacksmithShop();

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

        /// <summary>The blacksmith's reply to one line of the player.</summary>
        public async Task<string> SayAsync(string line)
        {
            if (orchestrator == null) return "(the runtime is not ready yet)";
            AiTaskResult result = await orchestrator.RunTaskWithResultAsync(new AiTaskRequest { RoleId = RoleId, Hint = line });
            return result.Succeeded ? result.Text : "(Brom scratches his head: " + result.Status + ")";
        }

        private void Awake()
        {
            BuildAgent(AgentMemoryPolicy.Default, Shop);
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
