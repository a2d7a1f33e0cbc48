using System;
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
    }
}
