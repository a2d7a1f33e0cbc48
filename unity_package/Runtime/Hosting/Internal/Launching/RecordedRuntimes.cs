using System;
using System.IO;
using System.Threading;

namespace CoreAI.Launcher
{
    /// <summary>The runtimes recorded under a data dir (the game's `CoreAI/runtime/` and the editor's `CoreAI/runtime/editor/`).</summary>
    internal static class RecordedRuntimes
    {
        private static readonly string[] Instances = { "", RuntimeLaunchOptions.EditorInstance };

        /// <summary>Stops each recorded runtime that is alive and accepts its recorded token; true when one was stopped.</summary>
        public static bool Stop(string dataDir, TimeSpan timeout)
        {
            bool stopped = false;
            foreach (string instance in Instances) stopped |= StopAt(StateFileOf(dataDir, instance), timeout);
            return stopped;
        }

        /// <summary>True when a recorded runtime that still runs was started from a file inside `folder`.</summary>
        public static bool RunFrom(string dataDir, string folder)
        {
            if (string.IsNullOrEmpty(dataDir) || string.IsNullOrEmpty(folder)) return false;
            string prefix = Path.GetFullPath(folder).TrimEnd(Path.DirectorySeparatorChar) + Path.DirectorySeparatorChar;
            StringComparison comparison = Platform.IsWindows || Platform.IsMac ? StringComparison.OrdinalIgnoreCase : StringComparison.Ordinal;
            foreach (string instance in Instances)
            {
                RuntimeState state = RuntimeStateFile.Read(StateFileOf(dataDir, instance));
                if (state == null || string.IsNullOrEmpty(state.RuntimePath)) continue;
                if (Path.GetFullPath(state.RuntimePath).StartsWith(prefix, comparison) && RuntimeStateFile.IsAlive(state)) return true;
            }
            return false;
        }

        private static string StateFileOf(string dataDir, string instance)
        {
            string folder = RuntimeLauncher.RuntimeFolderOf(dataDir);
            return Path.Combine(instance.Length == 0 ? folder : Path.Combine(folder, instance), "launcher.json");
        }

        private static bool StopAt(string statePath, TimeSpan timeout)
        {
            RuntimeState state = RuntimeStateFile.Read(statePath);
            if (state == null) return false;
            bool ours = RuntimeStateFile.IsAlive(state)
                && HealthProbe.AcceptsToken(state.BaseUrl, state.Token, TimeSpan.FromSeconds(2), CancellationToken.None);
            if (ours) RuntimeStopper.Stop(state.ProcessId, null, timeout, state.BaseUrl, state.Token);
            RuntimeStateFile.Delete(statePath, 0);
            return ours;
        }
    }
}
