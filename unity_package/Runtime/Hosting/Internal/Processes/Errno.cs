namespace CoreAI.Launcher
{
    /// <summary>Words for the errno values a spawn meets (the same numbers on Linux and macOS).</summary>
    internal static class Errno
    {
        /// <summary>"no such file or folder (ENOENT)", or "errno N" for the others.</summary>
        public static string Describe(int errno)
        {
            switch (errno)
            {
                case 1: return "not permitted (EPERM)";
                case 2: return "no such file or folder (ENOENT)";
                case 7: return "the arguments and environment are too long (E2BIG)";
                case 8: return "not an executable this machine can run (ENOEXEC)";
                case 12: return "out of memory (ENOMEM)";
                case 13: return "permission denied: not executable, or a folder on the way is not searchable (EACCES)";
                case 20: return "a part of the path is not a folder (ENOTDIR)";
                case 26: return "the file is open for writing (ETXTBSY)";
                default: return "errno " + errno;
            }
        }
    }
}
