using CoreAI.Ai;

namespace CoreAI
{
    /// <summary>
    /// The Core's process-wide game state, in one place: reset at the start of every play by the Unity layer (Core has no
    /// UnityEngine reference), so a play with the domain reload off starts from what one with it on starts from.
    /// </summary>
    /// <remarks>
    /// Kept on purpose across plays: settings a developer sets (RuntimeAgentMemoryStore.DefaultSynchronousCallTimeout,
    /// possibly from editor code that a reload-free play does not run again), the launcher's runtimes of this process (the
    /// editor keeps its runtime between plays), and the JSON converters' reflection caches, which hold no game state.
    /// </remarks>
    internal static class StaticState
    {
        /// <summary>A fresh <see cref="AgentMemoryPolicy.Default"/>: the roles one play configured are gone in the next.</summary>
        internal static void Reset()
        {
            AgentMemoryPolicy.ResetDefault();
        }
    }
}
