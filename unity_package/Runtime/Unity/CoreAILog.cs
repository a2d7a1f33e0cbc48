using System;
using CoreAI.Launcher;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// The package's log lines in the Console, tagged [CoreAI]. Callers pass counts, ports, pids and
    /// durations only: never role ids, player text, keys or paths under persistentDataPath (the
    /// user's name is part of that path on most systems).
    /// </summary>
    public static class CoreAILog
    {
        /// <summary>Prefix of every line.</summary>
        public const string Tag = "[CoreAI] ";

        /// <summary>Minimum level written; Info by default.</summary>
        public static CoreAILogLevel Level { get; set; } = CoreAILogLevel.Info;

        /// <summary>An informational line.</summary>
        public static void Info(string message)
        {
            if (Level <= CoreAILogLevel.Info) Debug.Log(Tag + message);
        }

        /// <summary>A warning line.</summary>
        public static void Warning(string message)
        {
            if (Level <= CoreAILogLevel.Warning) Debug.LogWarning(Tag + message);
        }

        /// <summary>An error line.</summary>
        public static void Error(string message)
        {
            if (Level <= CoreAILogLevel.Error) Debug.LogError(Tag + message);
        }

        /// <summary>An error line for an exception: its type and message (messages of this package carry no player data).</summary>
        public static void Exception(string what, Exception e)
        {
            Error(what + ": " + e.GetType().Name + ": " + e.Message);
        }

        /// <summary>The Console line of a launcher event, at its level (none for the quiet ones: started, reused, stopped).</summary>
        public static void LauncherEvent(RuntimeLauncherEvent e)
        {
            string detail = e.Message.Length > 0 ? " (" + e.Message + ")" : "";
            switch (e.Kind)
            {
                case RuntimeLauncherEventKind.Exited:
                    Warning("the runtime (pid " + e.ProcessId + ") exited unexpectedly" + detail);
                    break;
                case RuntimeLauncherEventKind.Restarting:
                    Info("restarting the runtime in " + e.Delay.TotalSeconds.ToString("0.#") + " s (attempt " + e.Attempt + ")");
                    break;
                case RuntimeLauncherEventKind.RestartFailed:
                    Warning("restart attempt " + e.Attempt + " failed: " + e.Message);
                    break;
                case RuntimeLauncherEventKind.GaveUp:
                    Error("the runtime keeps failing; stopped restarting it: " + e.Message);
                    break;
                case RuntimeLauncherEventKind.PortsChosen:
                case RuntimeLauncherEventKind.Updated:
                    Warning(e.Message);
                    break;
                case RuntimeLauncherEventKind.Restarted:
                    Info("runtime restarted (pid " + e.ProcessId + ")");
                    break;
            }
        }
    }
}
