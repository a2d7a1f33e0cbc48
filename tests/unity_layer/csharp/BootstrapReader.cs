// A game script that looks for the bootstrap in its Awake, as game code does before calling CreateClient.
using CoreAI.UnityIntegration;
using UnityEngine;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>Records CoreAIRuntimeBootstrap.Instance as its Awake sees it.</summary>
    public sealed class BootstrapReader : MonoBehaviour
    {
        /// <summary>The bootstrap Awake found (null: none yet).</summary>
        public CoreAIRuntimeBootstrap SeenInAwake;

        private void Awake()
        {
            SeenInAwake = CoreAIRuntimeBootstrap.Instance;
        }
    }
}
