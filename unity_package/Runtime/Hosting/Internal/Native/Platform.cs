using System;
using System.Runtime.InteropServices;

namespace CoreAI.Launcher
{
    /// <summary>The operating system the launcher runs on (asked at run time: one editor build serves every target).</summary>
    internal static class Platform
    {
        /// <summary>True on Windows.</summary>
        public static bool IsWindows
        {
            get { return Environment.OSVersion.Platform == PlatformID.Win32NT; }
        }

        /// <summary>True on macOS.</summary>
        public static bool IsMac
        {
            get { return RuntimeInformation.IsOSPlatform(OSPlatform.OSX); }
        }
    }
}
