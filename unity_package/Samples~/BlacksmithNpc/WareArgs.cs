using CoreAI.Ai;

namespace CoreAI.Samples.BlacksmithNpc
{
    /// <summary>The arguments of Brom's game tools.</summary>
    /// <remarks>[Preserve]: Newtonsoft fills it by reflection, which IL2CPP's stripping (Medium/High) cannot see.</remarks>
    [UnityEngine.Scripting.Preserve]
    public sealed class WareArgs
    {
        [ToolParameter("The item, one of the wares Brom sells.")]
        public Ware Item;
    }
}
