using System;

namespace CoreAI.Launcher
{
    /// <summary>One event of a launcher (raised on the launcher's watchdog thread, not the main thread).</summary>
    public sealed class RuntimeLauncherEvent
    {
        /// <summary>Creates an event.</summary>
        public RuntimeLauncherEvent(RuntimeLauncherEventKind kind, int processId, int attempt, TimeSpan delay, string message)
        {
            Kind = kind;
            ProcessId = processId;
            Attempt = attempt;
            Delay = delay;
            Message = message ?? "";
        }

        /// <summary>What happened.</summary>
        public RuntimeLauncherEventKind Kind { get; private set; }

        /// <summary>The runtime's process id (the new one after a restart; 0 when none).</summary>
        public int ProcessId { get; private set; }

        /// <summary>The restart attempt in the current series (1 = first), 0 when not a restart.</summary>
        public int Attempt { get; private set; }

        /// <summary>The delay before this restart attempt.</summary>
        public TimeSpan Delay { get; private set; }

        /// <summary>Details for the developer (exit code, error, log tail); no player data.</summary>
        public string Message { get; private set; }

        /// <summary>A one-line description.</summary>
        public override string ToString()
        {
            return Kind + " pid=" + ProcessId + (Attempt > 0 ? " attempt=" + Attempt + " delay=" + Delay.TotalSeconds.ToString("0.##") + "s" : "")
                + (Message.Length > 0 ? ": " + Message : "");
        }
    }
}
