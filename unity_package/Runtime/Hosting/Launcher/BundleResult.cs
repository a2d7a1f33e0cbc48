using System;

namespace CoreAI.Launcher
{
    /// <summary>What a build step copied into a player build.</summary>
    public sealed class BundleResult
    {
        /// <summary>A result for `runtimeFolder` (and `modelFile`, or null) under `streamingAssets`.</summary>
        public BundleResult(string platform, string streamingAssets, string runtimeFolder, string executable, string modelFile, int fileCount)
        {
            Platform = platform;
            StreamingAssets = streamingAssets;
            RuntimeFolder = runtimeFolder;
            Executable = executable;
            ModelFile = modelFile;
            FileCount = fileCount;
        }

        /// <summary>`windows`, `macos` or `linux`.</summary>
        public string Platform { get; private set; }

        /// <summary>The player's StreamingAssets folder.</summary>
        public string StreamingAssets { get; private set; }

        /// <summary>Where the runtime now is: `StreamingAssets/CoreAI/runtime`.</summary>
        public string RuntimeFolder { get; private set; }

        /// <summary>The runtime executable inside the player build.</summary>
        public string Executable { get; private set; }

        /// <summary>The model copied next to it (`StreamingAssets/CoreAI/models/…`), or null.</summary>
        public string ModelFile { get; private set; }

        /// <summary>How many files were copied (runtime and model).</summary>
        public int FileCount { get; private set; }

        /// <summary>The `serve --config` file written next to the runtime (`StreamingAssets/CoreAI/coreai-runtime.json`), or null.</summary>
        public string ConfigFile { get; internal set; }
    }
}
