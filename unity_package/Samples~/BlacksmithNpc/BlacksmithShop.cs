using System.Collections.Generic;

namespace CoreAI.Samples.BlacksmithNpc
{
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
}
