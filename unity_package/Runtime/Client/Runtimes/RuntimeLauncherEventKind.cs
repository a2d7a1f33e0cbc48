using System;

namespace CoreAI.Launcher
{
    /// <summary>What happened to the runtime.</summary>
    public enum RuntimeLauncherEventKind
    {
        /// <summary>A new runtime was started and answers health.</summary>
        Started,

        /// <summary>A runtime this project started earlier (before a domain reload) was reused.</summary>
        Reused,

        /// <summary>The runtime exited unexpectedly.</summary>
        Exited,

        /// <summary>A restart is scheduled after Delay.</summary>
        Restarting,

        /// <summary>The runtime was restarted and answers health.</summary>
        Restarted,

        /// <summary>A restart attempt failed; another follows after a longer delay.</summary>
        RestartFailed,

        /// <summary>Too many restarts failed in a row, or the watchdog met an internal error (the message says which);
        /// the launcher stopped trying.</summary>
        GaveUp,

        /// <summary>The runtime was stopped on request.</summary>
        Stopped,

        /// <summary>The configured ports were taken: the runtime starts on the ports the message names (this project's own).</summary>
        PortsChosen,

        /// <summary>A runtime fetched while the previous one ran took its folder's place before this start (or still waits: the message says).</summary>
        Updated,
    }
}
