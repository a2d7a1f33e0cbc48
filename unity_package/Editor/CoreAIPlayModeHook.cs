using CoreAI.UnityIntegration;
using UnityEditor;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// Ends the play session the moment Stop is pressed (ExitingPlayMode, before any OnApplicationQuit or OnDisable):
    /// turns in flight are cancelled and no game tool or stream callback of the stopped game runs in Edit Mode.
    /// </summary>
    [InitializeOnLoad]
    public static class CoreAIPlayModeHook
    {
        static CoreAIPlayModeHook()
        {
            EditorApplication.playModeStateChanged += OnPlayModeStateChanged;
        }

        private static void OnPlayModeStateChanged(PlayModeStateChange change)
        {
            if (change == PlayModeStateChange.ExitingPlayMode) CoreAIPlaySession.End();
        }
    }
}
