using System;

namespace CoreAI.Launcher
{
    /// <summary>The OS refused to start a process; the message names the program and the OS's reason.</summary>
    internal sealed class SpawnException : Exception
    {
        /// <summary>A refusal with the OS's error number (errno, or a Win32 error code).</summary>
        public SpawnException(string message, int errorCode) : base(message)
        {
            ErrorCode = errorCode;
        }

        /// <summary>errno on Linux and macOS, the Win32 error code on Windows.</summary>
        public int ErrorCode { get; private set; }
    }
}
