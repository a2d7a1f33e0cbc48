using System;
using System.IO;
using CoreAI.Launcher;

namespace CoreAI.EditorTools
{
    /// <summary>The `persistentDataPath/CoreAI` tree: every CoreAI save of the project. Plain logic, no editor UI.</summary>
    public static class PersistentSaves
    {
        /// <summary>The folder under persistentDataPath that holds every CoreAI save.</summary>
        public const string FolderName = "CoreAI";

        /// <summary>The text of the confirmation dialog.</summary>
        public const string ConfirmationMessage =
            "Delete the whole persistentDataPath/CoreAI folder?\n\n"
            + "This removes AgentMemory (memory documents + persisted chat), ConversationSummaries, LuaScriptVersions "
            + "and DataOverlayVersions, and every other CoreAI folder there too (skills, Lua mods and mod logs, world "
            + "state, the audit log, saved endpoint settings) and the model's saved conversation states (runtime/).\n\n"
            + "A running CoreAI runtime of this project is stopped first (its model keeps no conversation once stopped). "
            + "This cannot be undone.";

        /// <summary>`&lt;persistentDataPath&gt;/CoreAI`.</summary>
        public static string RootOf(string persistentDataPath)
        {
            return Path.Combine(persistentDataPath, FolderName);
        }

        /// <summary>
        /// Deletes exactly `&lt;persistentDataPath&gt;/CoreAI` (nothing beside it) after stopping a runtime
        /// recorded there. Refused in Play Mode: the running game holds these files.
        /// </summary>
        /// <exception cref="InvalidOperationException">isPlaying is true; nothing is deleted.</exception>
        /// <exception cref="ArgumentException">persistentDataPath is blank or relative.</exception>
        public static DeleteSavesResult DeleteAll(string persistentDataPath, bool isPlaying)
        {
            if (isPlaying)
                throw new InvalidOperationException("Delete All Persistent Saves is not available in Play Mode: stop playing first (the running game uses these files)");
            if (string.IsNullOrWhiteSpace(persistentDataPath) || !Path.IsPathRooted(persistentDataPath))
                throw new ArgumentException("persistentDataPath must be an absolute path");
            DeleteSavesResult result = new DeleteSavesResult();
            string root = RootOf(Path.GetFullPath(persistentDataPath));
            bool isLink = File.Exists(root) || (Directory.Exists(root) && (File.GetAttributes(root) & FileAttributes.ReparsePoint) != 0);
            if (!Directory.Exists(root) && !isLink) return result;
            // This editor's own launchers first (the Memory Inspector's would restart the runtime into the folder being
            // deleted), then a runtime another process recorded here.
            result.StoppedRuntime = RuntimeLauncher.StopAll(persistentDataPath, TimeSpan.FromSeconds(10));
            if (isLink)
            {
                // A link (or a file) named CoreAI: remove the link itself, never what it points to.
                if (File.Exists(root)) File.Delete(root);
                else Directory.Delete(root, false);
                result.Deleted = true;
                return result;
            }
            result.FileCount = CountFiles(root);
            Directory.Delete(root, true);
            result.Deleted = true;
            return result;
        }

        private static int CountFiles(string dir)
        {
            int count = Directory.GetFiles(dir).Length;
            foreach (string sub in Directory.GetDirectories(dir))
            {
                if ((File.GetAttributes(sub) & FileAttributes.ReparsePoint) != 0) continue;
                count += CountFiles(sub);
            }
            return count;
        }
    }
}
