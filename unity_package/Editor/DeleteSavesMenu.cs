using System;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>CoreAI → Delete All Persistent Saves... (only outside Play Mode).</summary>
    public static class DeleteSavesMenu
    {
        /// <summary>The menu path.</summary>
        public const string MenuPath = "CoreAI/Delete All Persistent Saves...";

        /// <summary>Asks for confirmation, then deletes persistentDataPath/CoreAI; returns true when it was deleted.</summary>
        [MenuItem(MenuPath, false, 2000)]
        public static bool DeleteAllPersistentSaves()
        {
            if (EditorApplication.isPlaying)
            {
                EditorUtility.DisplayDialog("CoreAI", "Stop Play Mode first: the running game uses the saves.", "OK");
                return false;
            }
            if (!EditorUtility.DisplayDialog("Delete All CoreAI Saves", PersistentSaves.ConfirmationMessage, "Delete", "Cancel"))
                return false;
            try
            {
                DeleteSavesResult result = PersistentSaves.DeleteAll(Application.persistentDataPath, EditorApplication.isPlaying);
                CoreAILog.Info(result.Deleted
                    ? "deleted all persistent saves (" + result.FileCount + " file(s)" + (result.StoppedRuntime ? ", runtime stopped first" : "") + ")"
                    : "there were no persistent saves to delete");
                return result.Deleted;
            }
            catch (Exception e)
            {
                // The type only: IO messages carry the path, and with it the user's name.
                CoreAILog.Error("deleting the persistent saves failed: " + e.GetType().Name);
                return false;
            }
        }

        /// <summary>The menu item is disabled in Play Mode.</summary>
        [MenuItem(MenuPath, true)]
        public static bool CanDeleteAllPersistentSaves()
        {
            return !EditorApplication.isPlaying;
        }
    }
}
