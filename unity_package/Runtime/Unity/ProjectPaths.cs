using System.IO;
using System.Text.RegularExpressions;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// The project folder the package works from, the same in the main editor and in its Unity 6 Multiplayer Play Mode
    /// virtual players. A virtual player is a second editor process running a clone of the project from
    /// `&lt;project&gt;/Library/VP/&lt;id&gt;/`; it shares the main project's persistentDataPath (same company and product), so it
    /// is treated as the main project: one identity, so one shared runtime (the editor's), relative paths resolved
    /// against the main project (the same model and runtime files, so the same settings digest), and its own memory
    /// scope (<see cref="VirtualPlayerScope"/>). Read on the main thread (Application.dataPath is main-thread only).
    /// </summary>
    public static class ProjectPaths
    {
        private static readonly Regex VirtualPlayer = new Regex(@"^(.*)[/\\]Library[/\\]VP[/\\]([^/\\]+)[/\\]Assets[/\\]?$");

        /// <summary>The project folder (the main project's in a virtual player); "" in a player build without one.</summary>
        public static string Root()
        {
            return RootOf(Application.dataPath);
        }

        /// <summary>The virtual player's id (the folder name under Library/VP), or null in the main editor and in players.</summary>
        public static string VirtualPlayerId()
        {
            string id;
            MainProjectOf(Application.dataPath, out id);
            return id;
        }

        /// <summary>The project folder of an Assets path (`dataPath`): its parent, or the main project's for a virtual player's.</summary>
        public static string RootOf(string dataPath)
        {
            string id;
            string main = MainProjectOf(dataPath, out id);
            if (main != null) return main;
            DirectoryInfo parent = string.IsNullOrEmpty(dataPath) ? null : Directory.GetParent(dataPath.TrimEnd('/', '\\'));
            return parent == null ? "" : parent.FullName;
        }

        /// <summary>The main project's folder when `dataPath` is a virtual player's (`…/Library/VP/&lt;id&gt;/Assets`), else null.</summary>
        public static string MainProjectOf(string dataPath, out string virtualPlayerId)
        {
            virtualPlayerId = null;
            if (string.IsNullOrEmpty(dataPath)) return null;
            Match match = VirtualPlayer.Match(dataPath);
            if (!match.Success) return null;
            virtualPlayerId = match.Groups[2].Value;
            return Path.GetFullPath(match.Groups[1].Value);
        }

        /// <summary>The Assets path identity is derived from: the main project's in a virtual player.</summary>
        public static string IdentityDataPath(string dataPath)
        {
            string id;
            string main = MainProjectOf(dataPath, out id);
            return main == null ? dataPath : Path.Combine(main, "Assets").Replace('\\', '/');
        }

        /// <summary>The default memory scope of a virtual player: its own player (user) id, so players do not share memory.</summary>
        public static CoreAI.Ai.AgentMemoryScope VirtualPlayerScope(string virtualPlayerId)
        {
            return string.IsNullOrEmpty(virtualPlayerId) ? null : CoreAI.Ai.AgentMemoryScope.ForUser("virtual-player-" + virtualPlayerId);
        }
    }
}
