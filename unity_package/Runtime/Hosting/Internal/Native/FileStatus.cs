namespace CoreAI.Launcher
{
    /// <summary>What fstat(2) says of a file, the parts the downloads need: which file it is, its type and its size.</summary>
    internal struct FileStatus
    {
        private const int TypeMask = 0xF000;  // S_IFMT, and the types below, are the same on Linux and macOS

        public ulong Device;
        public ulong Inode;
        public int Mode;
        public long Size;

        /// <summary>A regular file (S_IFREG).</summary>
        public bool IsRegular
        {
            get { return (Mode & TypeMask) == 0x8000; }
        }

        /// <summary>A folder (S_IFDIR).</summary>
        public bool IsDirectory
        {
            get { return (Mode & TypeMask) == 0x4000; }
        }

        /// <summary>True when `other` is the same file (device and inode).</summary>
        public bool SameFileAs(FileStatus other)
        {
            return Device == other.Device && Inode == other.Inode;
        }
    }
}
