using System.Collections.Generic;

namespace CoreAI.Launcher
{
    /// <summary>What to start: a program, its arguments, the environment it adds, where it runs and where its output goes.</summary>
    internal sealed class SpawnRequest
    {
        /// <summary>The program's full path (a bare name is not looked up: resolve it first).</summary>
        public string Executable { get; set; }

        /// <summary>The arguments after the program's own name, as the program will receive them.</summary>
        public IList<string> Arguments { get; set; } = new List<string>();

        /// <summary>Variables set for the program on top of this process's environment (a null value removes one).</summary>
        public IDictionary<string, string> Environment { get; set; } = new Dictionary<string, string>();

        /// <summary>The program's working directory (must exist); null or empty: this process's.</summary>
        public string WorkingDirectory { get; set; }

        /// <summary>
        /// The file stdout and stderr are appended to (created owner-only when missing); stdin is the null device. No pipe
        /// ever: a pipe a reloaded script domain stops reading would block or silence the program.
        /// </summary>
        public string LogPath { get; set; }
    }
}
