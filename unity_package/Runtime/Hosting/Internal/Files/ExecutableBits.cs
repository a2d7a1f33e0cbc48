using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The executables of a runtime folder: the runtime itself and llama.cpp's `llama-server` beside it (the engine the
    /// runtime starts). Both lose their executable bit through a Windows cross-build, a zip, Perforce or a store
    /// upload; Linux and macOS refuse to run them then. Restored with chmod(2) through P/Invoke, never by spawning chmod.
    /// </summary>
    internal static class ExecutableBits
    {
        /// <summary>The engine's file name beside the runtime (no extension: Linux and macOS only).</summary>
        public const string EngineName = "llama-server";

        /// <summary>
        /// Gives `runtimeExecutable` and the engine beside it (when there is one) their executable bit back; returns null
        /// when both are executable afterwards, else the path that is not. Nothing to do on Windows.
        /// </summary>
        public static string Restore(string runtimeExecutable)
        {
            if (Platform.IsWindows) return null;
            if (!Posix.EnsureExecutable(runtimeExecutable)) return runtimeExecutable;
            string engine = Path.Combine(Path.GetDirectoryName(runtimeExecutable) ?? "", EngineName);
            if (File.Exists(engine) && !Posix.EnsureExecutable(engine)) return engine;
            return null;
        }

        /// <summary>Restore for every runtime folder a build copied (`folder/coreai-runtime` and its engine).</summary>
        public static string RestoreFolder(string folder, string executableName)
        {
            string exe = Path.Combine(folder, executableName);
            return File.Exists(exe) ? Restore(exe) : null;
        }
    }
}
