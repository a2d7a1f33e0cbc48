using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>A write failed because the disk (or the user's quota) is full.</summary>
    internal sealed class DiskFullException : IOException
    {
        private const int ErrorHandleDiskFull = 39;
        private const int ErrorDiskFull = 112;

        public DiskFullException(string message) : base(message)
        {
        }

        /// <summary>True when `error` says the disk is full: ENOSPC/EDQUOT here, ERROR_DISK_FULL from a Windows FileStream.</summary>
        public static bool Is(IOException error)
        {
            int code = error.HResult & 0xFFFF;
            return error is DiskFullException || ((error.HResult & unchecked((int)0xFFFF0000)) == unchecked((int)0x80070000)
                && (code == ErrorHandleDiskFull || code == ErrorDiskFull));
        }
    }
}
