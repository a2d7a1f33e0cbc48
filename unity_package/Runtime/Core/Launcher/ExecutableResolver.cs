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

    /// <summary>The operating system the launcher runs on.</summary>
    internal static class Platform
    {
        /// <summary>True on Windows.</summary>
        public static bool IsWindows
        {
            get { return Environment.OSVersion.Platform == PlatformID.Win32NT; }
        }
    }
}
