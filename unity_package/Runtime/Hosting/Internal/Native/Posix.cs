using System;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>
    /// File modes, links and signals on Linux and macOS through <see cref="Libc"/>; every call answers "failed" (-1,
    /// null, false) where there is no C library binding (Windows). Never spawns `chmod`, `ln` or `kill`.
    /// </summary>
    internal static class Posix
    {
        private const int ExecuteOk = 1;  // access(2)'s X_OK

        /// <summary>0755: what an executable in the runtime's folder gets back when its bit was lost.</summary>
        public const int Executable = 0x1ED;

        /// <summary>True when this build and OS have the C library calls.</summary>
        public static bool Available
        {
            get { return Libc.Current != null; }
        }

        /// <summary>The last failed call's errno (0 where unavailable).</summary>
        public static int LastError { get; private set; }

        /// <summary>chmod(2): 0 on success, -1 on failure.</summary>
        public static int Chmod(string path, int mode)
        {
            return Call(lib =>
            {
                using (NativeMemory memory = new NativeMemory()) return lib.Chmod(memory.Utf8(path), mode);
            });
        }

        /// <summary>kill(2): 0 on success, -1 on failure.</summary>
        public static int Kill(int pid, int signal)
        {
            return Call(lib => lib.Kill(pid, signal));
        }

        /// <summary>True when `path` is executable by this user (access X_OK).</summary>
        public static bool IsExecutable(string path)
        {
            return Call(lib =>
            {
                using (NativeMemory memory = new NativeMemory()) return lib.Access(memory.Utf8(path), ExecuteOk);
            }) == 0;
        }

        /// <summary>
        /// Makes `path` executable (0755) when it is not: the executable bit does not survive a Windows cross-build, a
        /// zip, Perforce or a store upload. True when it is executable afterwards.
        /// </summary>
        public static bool EnsureExecutable(string path)
        {
            return IsExecutable(path) || Chmod(path, Executable) == 0;
        }

        /// <summary>The target a symbolic link points at (as written in the link), or null when `path` is no link.</summary>
        public static string ReadLink(string path)
        {
            Libc lib = Libc.Current;
            if (lib == null) return null;
            byte[] buffer = new byte[4096];
            long length;
            using (NativeMemory memory = new NativeMemory()) length = lib.ReadLink(memory.Utf8(path), buffer, buffer.Length);
            if (length < 0)
            {
                LastError = lib.LastError;
                return null;
            }
            return Encoding.UTF8.GetString(buffer, 0, (int)Math.Min(length, buffer.Length));
        }

        /// <summary>Creates the symbolic link `link` pointing at `target` (kept as written: relative stays relative); 0 on success.</summary>
        public static int Symlink(string target, string link)
        {
            return Call(lib =>
            {
                using (NativeMemory memory = new NativeMemory()) return lib.Symlink(memory.Utf8(target), memory.Utf8(link));
            });
        }

        private static int Call(Func<Libc, int> call)
        {
            Libc lib = Libc.Current;
            if (lib == null)
            {
                LastError = 0;
                return -1;
            }
            int result = call(lib);
            if (result != 0) LastError = lib.LastError;
            return result;
        }
    }
}
