using System;
using System.Collections.Generic;
using CoreAI.UnityIntegration;
using UnityEditor;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// The one rule by which every editor tool (the Memory Inspector, the player build step) picks the project's
    /// CoreAIRuntimeSettings: the first asset by path, so they always agree; with several, a warning names the rule.
    /// The bootstrap uses the asset assigned to it: keep that one first by path (or keep only one).
    /// </summary>
    public static class ProjectSettingsAsset
    {
        /// <summary>The project's CoreAIRuntimeSettings (the first by asset path), or null when there is none. Main thread.</summary>
        public static CoreAIRuntimeSettings Find()
        {
            string path;
            return Find(out path);
        }

        /// <summary>Find, with the chosen asset's path.</summary>
        public static CoreAIRuntimeSettings Find(out string path)
        {
            List<string> paths = new List<string>();
            foreach (string guid in AssetDatabase.FindAssets("t:CoreAIRuntimeSettings")) paths.Add(AssetDatabase.GUIDToAssetPath(guid));
            paths.Sort(StringComparer.Ordinal);
            int found = 0;
            CoreAIRuntimeSettings chosen = null;
            path = null;
            foreach (string candidate in paths)
            {
                CoreAIRuntimeSettings settings = AssetDatabase.LoadAssetAtPath<CoreAIRuntimeSettings>(candidate);
                if (settings == null) continue;
                found++;
                if (chosen != null) continue;
                chosen = settings;
                path = candidate;
            }
            if (found > 1)
                CoreAILog.Warning(found + " CoreAIRuntimeSettings assets: the editor tools use the first by path (" + path + "); keep the bootstrap's first, or keep one");
            return chosen;
        }
    }
}
