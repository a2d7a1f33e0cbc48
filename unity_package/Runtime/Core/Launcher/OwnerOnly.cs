using System;
using System.ComponentModel;
using System.Diagnostics;
using System.IO;
using System.Runtime.InteropServices;

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
            int result = ChmodAnyLibc(path, OwnerReadWrite);
            if (result != 0)
            {
                throw new IOException("cannot make " + Path.GetFileName(path) + " private (chmod 600 failed, errno " + Marshal.GetLastWin32Error() + ")");
            }
        }

        // System.IO has no chmod before .NET 7, and neither API level has Mono.Posix: the C library's own.
        [DllImport("libc", EntryPoint = "chmod", SetLastError = true)]
        private static extern int Chmod(string path, int mode);

        [DllImport("libc.so.6", EntryPoint = "chmod", SetLastError = true)]
        private static extern int ChmodGlibc(string path, int mode);

        [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "chmod", SetLastError = true)]
        private static extern int ChmodMac(string path, int mode);

        // "libc" resolves under Mono (its dllmap); IL2CPP players need the real file name, which differs per OS.
        private static int ChmodAnyLibc(string path, int mode)
        {
            try
            {
                return Chmod(path, mode);
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException)
            {
            }
            try
            {
                return ChmodGlibc(path, mode);
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException)
            {
            }
            return ChmodMac(path, mode);
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
