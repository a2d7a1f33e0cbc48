namespace CoreAI.Downloads
{
    /// <summary>A model the catalogue knows by name (the runtime's `coreai-runtime models list`).</summary>
    public sealed class CatalogModel
    {
        /// <summary>An entry; `sizeBytes` -1 where no verified source gave the exact size.</summary>
        public CatalogModel(string name, string url, string sha256, long sizeBytes, string license, int contextLength,
            string toolMode, string memoryDesign, string description, string checksumSource)
        {
            Name = name;
            Url = url;
            Sha256 = sha256;
            SizeBytes = sizeBytes;
            License = license;
            ContextLength = contextLength;
            ToolMode = toolMode;
            MemoryDesign = memoryDesign;
            Description = description;
            ChecksumSource = checksumSource;
        }

        /// <summary>The name models are pulled and served by.</summary>
        public string Name { get; private set; }

        /// <summary>Where the GGUF file is downloaded from.</summary>
        public string Url { get; private set; }

        /// <summary>The file's sha256 (hex): a download that does not match it is deleted.</summary>
        public string Sha256 { get; private set; }

        /// <summary>The file's size in bytes; -1 when not known beforehand.</summary>
        public long SizeBytes { get; private set; }

        /// <summary>The model's licence: read it before shipping the model in a game.</summary>
        public string License { get; private set; }

        /// <summary>The trained context length in tokens.</summary>
        public int ContextLength { get; private set; }

        /// <summary>The tool-call mode it suits: "structured" or "native".</summary>
        public string ToolMode { get; private set; }

        /// <summary>How memory is best written with it: "writer" or "tool".</summary>
        public string MemoryDesign { get; private set; }

        /// <summary>What it is good for.</summary>
        public string Description { get; private set; }

        /// <summary>Where the checksum comes from, and whether it was verified.</summary>
        public string ChecksumSource { get; private set; }

        /// <summary>The cached file's name.</summary>
        public string FileName
        {
            get { return Name + ".gguf"; }
        }
    }
}
