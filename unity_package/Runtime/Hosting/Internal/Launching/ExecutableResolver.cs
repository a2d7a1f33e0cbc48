using System;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>Finds the runtime program: a path as given, or a bare name on PATH.</summary>
    internal static class ExecutableResolver
    {
        /// <summary>The full path of `path`, or null when no such file exists.</summary>
        public static string Resolve(string path)
        {
            if (string.IsNullOrWhiteSpace(path)) return null;
            string expanded = Environment.ExpandEnvironmentVariables(path.Trim());
            bool hasDirectory = expanded.IndexOf(Path.DirectorySeparatorChar) >= 0
                || expanded.IndexOf(Path.AltDirectorySeparatorChar) >= 0;
            if (hasDirectory) return FirstExisting(Path.GetFullPath(expanded));
            string searchPath = Environment.GetEnvironmentVariable("PATH") ?? "";
            foreach (string dir in searchPath.Split(Path.PathSeparator))
            {
                if (dir.Length == 0) continue;
                string found = FirstExisting(Path.Combine(dir, expanded));
                if (found != null) return found;
            }
            return null;
        }

        /// <summary>Why `path` was not found and what to do, with the PATH hint a bare name needs.</summary>
        public static string NotFoundMessage(string path)
        {
            string given = (path ?? "").Trim();
            string install = "install the runtime (pip install the CoreAI runtime into a Python environment) and set Runtime Path "
                + "to its coreai-runtime or python, or to a bundled executable";
            bool bare = given.Length > 0 && given.IndexOf(Path.DirectorySeparatorChar) < 0 && given.IndexOf(Path.AltDirectorySeparatorChar) < 0;
            if (!bare)
            {
                return "CoreAI runtime not found at '" + given + "': " + install;
            }
            string[] dirs = (Environment.GetEnvironmentVariable("PATH") ?? "").Split(new[] { Path.PathSeparator }, StringSplitOptions.RemoveEmptyEntries);
            // The PATH the editor got is often not the shell's: a Unity Hub started from the Dock or Finder gets launchd's short PATH.
            return "CoreAI runtime '" + given + "' was not found on the PATH this process sees (" + dirs.Length + " folders: "
                + string.Join(Path.PathSeparator.ToString(), dirs) + "). An editor started from Unity Hub (on macOS always, "
                + "on Linux from a desktop launcher) does not inherit your shell's PATH, so a runtime in a virtual environment, "
                + "~/.local/bin or /opt/homebrew/bin is not seen: set Runtime Path to its full path (`which " + given
                + "` in a terminal prints it), or " + install;
        }

        private static string FirstExisting(string candidate)
        {
            if (File.Exists(candidate)) return candidate;
            if (!Platform.IsWindows || Path.HasExtension(candidate)) return null;
            foreach (string ext in new[] { ".exe", ".cmd", ".bat" })
            {
                if (File.Exists(candidate + ext)) return candidate + ext;
            }
            return null;
        }
    }
}
