using System;

namespace CoreAI.Launcher
{
    /// <summary>Why a runtime could not be started.</summary>
    public enum RuntimeLaunchFailure
    {
        /// <summary>The runtime program does not exist at the configured path.</summary>
        RuntimeNotFound,

        /// <summary>A port the runtime needs is taken by another program.</summary>
        PortInUse,

        /// <summary>The runtime exited while starting (its log tail is in the message).</summary>
        ExitedDuringStart,

        /// <summary>The runtime did not answer health within the start timeout.</summary>
        StartTimeout,

        /// <summary>The process could not be spawned at all.</summary>
        SpawnFailed,

        /// <summary>The launcher was stopped while starting.</summary>
        Stopped,

        /// <summary>This platform cannot start processes and no remote runtime URL is set (Android, iOS, WebGL, consoles).</summary>
        PlatformUnsupported,

        /// <summary>The remote runtime (remote mode) did not answer in time, or its URL is not usable.</summary>
        RemoteUnreachable,

        /// <summary>The remote runtime refused the configured token.</summary>
        TokenRefused,

        /// <summary>The launcher let go while the runtime was starting (Detach): it keeps starting, the next launcher reuses it.</summary>
        Detached,

        /// <summary>The runtime could not be recorded in launcher.json; it was stopped, so it holds no ports.</summary>
        StateFileFailed,

        /// <summary>A setting cannot be used as it is (the message names it), e.g. an API key source that holds no key.</summary>
        SettingsInvalid,
    }
}
