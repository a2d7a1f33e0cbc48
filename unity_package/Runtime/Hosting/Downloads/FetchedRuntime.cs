namespace CoreAI.Downloads
{
    /// <summary>A runtime "Fetch Runtime" installed: where its executable is, which release it is, and whether it waits.</summary>
    public sealed class FetchedRuntime
    {
        /// <summary>A fetched runtime.</summary>
        public FetchedRuntime(string executable, string version, bool waitsForNextStart)
        {
            Executable = executable;
            Version = version;
            WaitsForNextStart = waitsForNextStart;
        }

        /// <summary>The runtime executable's path in the target folder (where it is, or will be after the next start).</summary>
        public string Executable { get; private set; }

        /// <summary>The release tag, the archive and its sha256, as recorded in `coreai-runtime.version`.</summary>
        public string Version { get; private set; }

        /// <summary>
        /// True when a runtime ran from the target folder: the new one waits beside it (`&lt;folder&gt;.pending`) and replaces
        /// it when the runtime next starts (Play, or the Memory Inspector's Connect); nothing was swapped under it.
        /// </summary>
        public bool WaitsForNextStart { get; private set; }
    }
}
