using System;

namespace CoreAI.Launcher
{
    /// <summary>Which Unity platforms can start the runtime as a process, and what to tell a game on the others.</summary>
    public static class RuntimePlatforms
    {
        // Desktop editors, players and dedicated servers: the OS spawns processes (posix_spawn, CreateProcessW) and a frozen
        // runtime can be bundled.
        private static readonly string[] Launching =
        {
            "WindowsEditor", "WindowsPlayer", "WindowsServer",
            "OSXEditor", "OSXPlayer", "OSXServer",
            "LinuxEditor", "LinuxPlayer", "LinuxServer",
        };

        // Platforms that can reach no runtime at all: WebGL has no HttpWebRequest (the transport of every client here) and
        // a browser page is refused by the runtime's Origin check. Withdrawn rather than promised untested.
        private static readonly string[] Unreachable = { "WebGLPlayer", "WebGL" };  // RuntimePlatform and BuildTarget names

        /// <summary>True unless the platform (a RuntimePlatform or BuildTarget name) can reach no runtime, neither its own nor a remote one (WebGL).</summary>
        public static bool CanReachARuntime(string runtimePlatform)
        {
            return Array.IndexOf(Unreachable, runtimePlatform ?? "") < 0;
        }

        /// <summary>True when the platform named like UnityEngine.RuntimePlatform (`Application.platform.ToString()`) can start processes.</summary>
        public static bool CanStartProcesses(string runtimePlatform)
        {
            return Array.IndexOf(Launching, runtimePlatform ?? "") >= 0;
        }

        /// <summary>Why a game on `runtimePlatform` has no runtime, and the two ways to give it one.</summary>
        public static string UnsupportedMessage(string runtimePlatform)
        {
            if (!CanReachARuntime(runtimePlatform))
                return "CoreAI: " + runtimePlatform + " is not supported: a WebGL build can neither start the CoreAI runtime nor "
                    + "reach a remote one (the client's HttpWebRequest transport does not exist in the browser, and the runtime "
                    + "refuses requests from web pages). Build the game for Windows, macOS, Linux, Android, iOS or a console.";
            return "CoreAI: " + runtimePlatform + " cannot start the CoreAI runtime (no processes on this platform). Either "
                + "bundle a runtime, which only Windows, macOS and Linux builds can run (CoreAIRuntimeSettings > Player builds), "
                + "or set a remote runtime URL and token (CoreAIRuntimeSettings > Remote runtime) to use a runtime "
                + "on a server (`coreai-runtime serve --listen ADDRESS --tls-cert … --tls-key …`).";
        }
    }
}
