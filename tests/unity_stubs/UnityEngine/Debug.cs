using System;
using System.Collections.Generic;

namespace UnityEngine
{
    /// <summary>Logging to the Console window (stub: lines are also kept in StubLog).</summary>
    public class Debug
    {
        /// <summary>Logs a message.</summary>
        public static void Log(object message)
        {
            StubLog.Add("Log", message);
        }

        /// <summary>Logs a warning.</summary>
        public static void LogWarning(object message)
        {
            StubLog.Add("Warning", message);
        }

        /// <summary>Logs an error.</summary>
        public static void LogError(object message)
        {
            StubLog.Add("Error", message);
        }

        /// <summary>Logs an exception.</summary>
        public static void LogException(Exception exception)
        {
            StubLog.Add("Exception", exception == null ? "Null" : exception.GetType().Name + ": " + exception.Message);
        }
    }

    /// <summary>Stub only: what was logged through Debug (engine state). Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubLog
    {
        private static readonly List<string> lines = new List<string>();

        /// <summary>A copy of the logged lines, "Level: message".</summary>
        public static string[] Lines
        {
            get { lock (lines) return lines.ToArray(); }
        }

        /// <summary>Forgets the logged lines.</summary>
        public static void Clear()
        {
            lock (lines) lines.Clear();
        }

        internal static void Add(string level, object message)
        {
            string line = level + ": " + (message == null ? "Null" : message.ToString());
            lock (lines) lines.Add(line);
            Console.Error.WriteLine(line);
        }
    }
}
