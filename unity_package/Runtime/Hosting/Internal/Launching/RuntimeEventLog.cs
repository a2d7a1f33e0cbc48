using System;
using System.Collections.Generic;

namespace CoreAI.Launcher
{
    /// <summary>A launcher's events: the newest 64 kept for status displays, each handed to the subscribers.</summary>
    internal sealed class RuntimeEventLog
    {
        private const int Limit = 64;
        private readonly List<RuntimeLauncherEvent> history = new List<RuntimeLauncherEvent>();

        /// <summary>Subscribers (called on the raising thread).</summary>
        public event Action<RuntimeLauncherEvent> Raised;

        /// <summary>The kept events, oldest first.</summary>
        public RuntimeLauncherEvent[] Recent()
        {
            lock (history) return history.ToArray();
        }

        /// <summary>Keeps `e` and hands it to every subscriber; a failing subscriber must not stop the watchdog.</summary>
        public void Raise(RuntimeLauncherEvent e)
        {
            lock (history)
            {
                history.Add(e);
                if (history.Count > Limit) history.RemoveAt(0);
            }
            Action<RuntimeLauncherEvent> handler = Raised;
            if (handler == null) return;
            try
            {
                handler(e);
            }
            catch (Exception)
            {
                // Swallowed on purpose: see the summary.
            }
        }
    }
}
