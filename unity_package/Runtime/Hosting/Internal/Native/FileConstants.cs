namespace CoreAI.Launcher
{
    /// <summary>The open(2) flags and errno values the downloads' folders use, as one OS numbers them.</summary>
    internal sealed class FileConstants
    {
        public const int ReadOnly = 0;
        public const int WriteOnly = 1;

        /// <summary>AT_FDCWD: a path relative to the working folder (or absolute).</summary>
        public int AtWorkingFolder;
        public int Create;
        public int Exclusive;
        public int Append;
        public int NonBlock;
        public int Directory;
        public int NoFollow;
        public int CloseOnExec;

        /// <summary>ENOENT.</summary>
        public int NoEntry = 2;
        /// <summary>EINTR.</summary>
        public int Interrupted = 4;
        /// <summary>ENXIO: a FIFO opened for writing without a reader (O_NONBLOCK).</summary>
        public int NoReader = 6;
        /// <summary>EACCES.</summary>
        public int Denied = 13;
        /// <summary>EEXIST.</summary>
        public int Exists = 17;
        /// <summary>ENOTDIR.</summary>
        public int NotDirectory = 20;
        /// <summary>EISDIR.</summary>
        public int IsDirectory = 21;
        /// <summary>ENOSPC.</summary>
        public int NoSpace = 28;
        /// <summary>ELOOP: O_NOFOLLOW met a link.</summary>
        public int Loop;
        /// <summary>EWOULDBLOCK: flock(LOCK_NB) on a file another process holds.</summary>
        public int WouldBlock;
        /// <summary>EDQUOT.</summary>
        public int QuotaExceeded;

        /// <summary>Linux (x64 and arm64 number these alike).</summary>
        public static readonly FileConstants Linux = new FileConstants
        {
            AtWorkingFolder = -100,
            Create = 0x40,
            Exclusive = 0x80,
            Append = 0x400,
            NonBlock = 0x800,
            Directory = 0x10000,
            NoFollow = 0x20000,
            CloseOnExec = 0x80000,
            Loop = 40,
            WouldBlock = 11,
            QuotaExceeded = 122,
        };

        /// <summary>macOS (BSD numbers).</summary>
        public static readonly FileConstants Mac = new FileConstants
        {
            AtWorkingFolder = -2,
            Create = 0x200,
            Exclusive = 0x800,
            Append = 0x8,
            NonBlock = 0x4,
            Directory = 0x100000,
            NoFollow = 0x100,
            CloseOnExec = 0x1000000,
            Loop = 62,
            WouldBlock = 35,
            QuotaExceeded = 69,
        };
    }
}
