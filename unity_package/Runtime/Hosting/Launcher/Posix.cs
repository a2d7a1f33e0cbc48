using System;
using System.Runtime.InteropServices;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The C library calls the launcher needs on Linux and macOS (System.IO has no chmod, symlinks or signals before
    /// .NET 7, and neither of Unity's API levels has Mono.Posix). Compiled only where Unity can run them: outside Unity,
    /// in the Linux and macOS editors and players. IL2CPP binds P/Invokes when it links, so on WebGL, consoles, iOS and
    /// Android they are left out, and every call here answers "not available" instead.
    /// </summary>
    internal static class Posix
    {
        /// <summary>True when this build carries the C library calls (false on platforms that never launch a runtime).</summary>
        public static readonly bool Available =
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_OSX || UNITY_EDITOR_LINUX || UNITY_STANDALONE_OSX || UNITY_STANDALONE_LINUX
            true;
#else
            false;
#endif

        private const int ExecuteOk = 1;  // access(2)'s X_OK
        private const int Executable = 0x1ED;  // 0755

        /// <summary>chmod(2): 0 on success, -1 on failure (and where unavailable).</summary>
        public static int Chmod(string path, int mode)
        {
            return Call(() => Native.Chmod(path, mode), () => Native.ChmodGlibc(path, mode), () => Native.ChmodMac(path, mode));
        }

        /// <summary>kill(2): 0 on success, -1 on failure (and where unavailable).</summary>
        public static int Kill(int pid, int signal)
        {
            return Call(() => Native.Kill(pid, signal), () => Native.KillGlibc(pid, signal), () => Native.KillMac(pid, signal));
        }

        /// <summary>
        /// Makes `path` executable (0755) when it is not: the executable bit does not survive a Windows cross-build, a
        /// zip, Perforce or a store upload. True when it is executable afterwards.
        /// </summary>
        public static bool EnsureExecutable(string path)
        {
            if (Call(() => Native.Access(path, ExecuteOk), () => Native.AccessGlibc(path, ExecuteOk), () => Native.AccessMac(path, ExecuteOk)) == 0)
                return true;
            return Chmod(path, Executable) == 0;
        }

        /// <summary>The target a symbolic link points at (as written in the link), or null when `path` is no link.</summary>
        public static string ReadLink(string path)
        {
            byte[] buffer = new byte[4096];
            int length = Call(() => Native.ReadLink(path, buffer, buffer.Length), () => Native.ReadLinkGlibc(path, buffer, buffer.Length),
                () => Native.ReadLinkMac(path, buffer, buffer.Length));
            return length < 0 ? null : Encoding.UTF8.GetString(buffer, 0, Math.Min(length, buffer.Length));
        }

        /// <summary>Creates the symbolic link `link` pointing at `target` (kept as written: relative stays relative); 0 on success.</summary>
        public static int Symlink(string target, string link)
        {
            return Call(() => Native.Symlink(target, link), () => Native.SymlinkGlibc(target, link), () => Native.SymlinkMac(target, link));
        }

        /// <summary>The last call's errno.</summary>
        public static int LastError
        {
            get { return Marshal.GetLastWin32Error(); }
        }

        // "libc" resolves under Mono (its dllmap); IL2CPP players need the real file name, which differs per OS.
        private static int Call(Func<int> libc, Func<int> glibc, Func<int> mac)
        {
            if (!Available) return -1;
            foreach (Func<int> attempt in new[] { libc, glibc, mac })
            {
                try
                {
                    return attempt();
                }
                catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException)
                {
                }
            }
            return -1;
        }

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_OSX || UNITY_EDITOR_LINUX || UNITY_STANDALONE_OSX || UNITY_STANDALONE_LINUX
        private static class Native
        {
            [DllImport("libc", EntryPoint = "chmod", SetLastError = true)]
            public static extern int Chmod(string path, int mode);

            [DllImport("libc.so.6", EntryPoint = "chmod", SetLastError = true)]
            public static extern int ChmodGlibc(string path, int mode);

            [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "chmod", SetLastError = true)]
            public static extern int ChmodMac(string path, int mode);

            [DllImport("libc", EntryPoint = "kill", SetLastError = true)]
            public static extern int Kill(int pid, int signal);

            [DllImport("libc.so.6", EntryPoint = "kill", SetLastError = true)]
            public static extern int KillGlibc(int pid, int signal);

            [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "kill", SetLastError = true)]
            public static extern int KillMac(int pid, int signal);

            [DllImport("libc", EntryPoint = "access", SetLastError = true)]
            public static extern int Access(string path, int mode);

            [DllImport("libc.so.6", EntryPoint = "access", SetLastError = true)]
            public static extern int AccessGlibc(string path, int mode);

            [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "access", SetLastError = true)]
            public static extern int AccessMac(string path, int mode);

            [DllImport("libc", EntryPoint = "readlink", SetLastError = true)]
            public static extern int ReadLink(string path, byte[] buffer, int size);

            [DllImport("libc.so.6", EntryPoint = "readlink", SetLastError = true)]
            public static extern int ReadLinkGlibc(string path, byte[] buffer, int size);

            [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "readlink", SetLastError = true)]
            public static extern int ReadLinkMac(string path, byte[] buffer, int size);

            [DllImport("libc", EntryPoint = "symlink", SetLastError = true)]
            public static extern int Symlink(string target, string link);

            [DllImport("libc.so.6", EntryPoint = "symlink", SetLastError = true)]
            public static extern int SymlinkGlibc(string target, string link);

            [DllImport("/usr/lib/libSystem.dylib", EntryPoint = "symlink", SetLastError = true)]
            public static extern int SymlinkMac(string target, string link);
        }
#else
        // Platforms that never launch a runtime: no P/Invoke for IL2CPP to bind; Available is false, nothing is called.
        private static class Native
        {
            public static int Chmod(string path, int mode) { return -1; }
            public static int ChmodGlibc(string path, int mode) { return -1; }
            public static int ChmodMac(string path, int mode) { return -1; }
            public static int Kill(int pid, int signal) { return -1; }
            public static int KillGlibc(int pid, int signal) { return -1; }
            public static int KillMac(int pid, int signal) { return -1; }
            public static int Access(string path, int mode) { return -1; }
            public static int AccessGlibc(string path, int mode) { return -1; }
            public static int AccessMac(string path, int mode) { return -1; }
            public static int ReadLink(string path, byte[] buffer, int size) { return -1; }
            public static int ReadLinkGlibc(string path, byte[] buffer, int size) { return -1; }
            public static int ReadLinkMac(string path, byte[] buffer, int size) { return -1; }
            public static int Symlink(string target, string link) { return -1; }
            public static int SymlinkGlibc(string target, string link) { return -1; }
            public static int SymlinkMac(string target, string link) { return -1; }
        }
#endif
    }
}
