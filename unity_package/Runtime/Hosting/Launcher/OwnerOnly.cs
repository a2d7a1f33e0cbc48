using System;
using System.ComponentModel;
using System.Diagnostics;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>Makes a file readable and writable by its owner only: mode 0600 on Unix, a user-only ACL on Windows.</summary>
    internal static class OwnerOnly
    {
        private const int OwnerReadWrite = 0x180;  // 0600

        /// <summary>Restrict `path`; throws IOException when the permissions cannot be set (the caller must not write secrets then).</summary>
        public static void Restrict(string path)
        {
            if (Platform.IsWindows)
            {
                RestrictWindows(path);
                return;
            }
            if (Posix.Chmod(path, OwnerReadWrite) != 0)
            {
                throw new IOException("cannot make " + Path.GetFileName(path) + " private (chmod 600 failed, errno " + Posix.LastError + ")");
            }
        }

        private static void RestrictWindows(string path)
        {
            // FileSecurity is not in .NET Standard; icacls is on every Windows: drop inherited entries, grant the user only.
            string user = Environment.UserDomainName + "\\" + Environment.UserName;
            var info = new ProcessStartInfo("icacls", "\"" + path + "\" /inheritance:r /grant:r \"" + user + ":F\"")
            {
                UseShellExecute = false,
                CreateNoWindow = true,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            try
            {
                using (Process process = Process.Start(info))
                {
                    process.StandardOutput.ReadToEnd();
                    process.StandardError.ReadToEnd();
                    if (!process.WaitForExit(10000) || process.ExitCode != 0)
                    {
                        throw new IOException("cannot make " + Path.GetFileName(path) + " private (icacls failed)");
                    }
                }
            }
            catch (Win32Exception e)
            {
                throw new IOException("cannot make " + Path.GetFileName(path) + " private (icacls: " + e.Message + ")", e);
            }
        }
    }
}
