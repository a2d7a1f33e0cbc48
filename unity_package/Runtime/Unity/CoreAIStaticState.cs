using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// Resets the package's static game state first of all at every play (Unity's SubsystemRegistration): with "Enter Play
    /// Mode Options" and the domain reload off, statics survive the last play, so without this the roles a game configured
    /// into <see cref="CoreAI.Ai.AgentMemoryPolicy.Default"/> in one play would still be there in the next.
    /// </summary>
    /// <remarks>
    /// Game code that configures roles does so after this (Awake, or its own RuntimeInitializeOnLoadMethod of a later load
    /// type). <see cref="CoreAIPlaySession"/> begins its session at the same point.
    /// </remarks>
    internal static class CoreAIStaticState
    {
        [RuntimeInitializeOnLoadMethod(RuntimeInitializeLoadType.SubsystemRegistration)]
        private static void ResetAtPlay()
        {
            StaticState.Reset();
        }
    }
}
