using System;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The C library calls the launcher makes on Linux and macOS: spawning and reaping processes, signals, file modes and
    /// symbolic links (System.IO has none of them before .NET 7, and neither of Unity's API levels has Mono.Posix). Two
    /// bindings, because the libraries' names and a few constants differ: <see cref="LinuxLibc"/> (glibc's `libc.so.6`)
    /// and <see cref="MacLibc"/> (`/usr/lib/libSystem.dylib`). Each is compiled only where Unity can run it, since IL2CPP
    /// binds P/Invokes when it links: a Linux player carries no macOS binding, and WebGL, mobile and console builds
    /// carry neither (CoreAI.Hosting is not compiled there at all).
    /// </summary>
    internal abstract class Libc
    {
        /// <summary>SIGKILL.</summary>
        public const int SigKill = 9;

        /// <summary>SIGTERM: the graceful stop a runtime answers like Ctrl+C.</summary>
        public const int SigTerm = 15;

        /// <summary>Signals whose disposition the spawned runtime gets back to the default (same numbers on both OSes).</summary>
        public static readonly int[] DefaultSignals = { 1, 2, 3, 13, 15 };  // SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM

        /// <summary>ENOENT.</summary>
        public const int NoSuchFile = 2;

        /// <summary>ECHILD: waitpid on a process that is not (or no longer) this process's child.</summary>
        public const int NoChild = 10;

        /// <summary>EPERM: kill refused, yet the process exists.</summary>
        public const int NotPermitted = 1;

        private const int WaitNoHang = 1;  // WNOHANG, the same on both

        /// <summary>The binding for this machine, or null where none is compiled or the OS is Windows.</summary>
        public static readonly Libc Current = Choose();

        /// <summary>open(2) flags for the log: write-only, create, append.</summary>
        public abstract int AppendFlags { get; }

        /// <summary>posix_spawn flag that closes every descriptor the file actions do not set (macOS only; 0 elsewhere).</summary>
        public abstract short CloseOnExecDefault { get; }

        /// <summary>posix_spawn(3); returns an errno value (0 on success).</summary>
        public abstract int Spawn(out int pid, IntPtr path, IntPtr fileActions, IntPtr attributes, IntPtr argv, IntPtr envp);

        /// <summary>posix_spawn_file_actions_init.</summary>
        public abstract int FileActionsInit(IntPtr actions);

        /// <summary>posix_spawn_file_actions_destroy.</summary>
        public abstract int FileActionsDestroy(IntPtr actions);

        /// <summary>posix_spawn_file_actions_addopen.</summary>
        public abstract int AddOpen(IntPtr actions, int fd, IntPtr path, int flags, int mode);

        /// <summary>posix_spawn_file_actions_adddup2.</summary>
        public abstract int AddDup2(IntPtr actions, int fd, int newFd);

        /// <summary>posix_spawn_file_actions_addclose.</summary>
        public abstract int AddClose(IntPtr actions, int fd);

        /// <summary>posix_spawn_file_actions_addchdir_np (glibc 2.29+, macOS 10.15+); EntryPointNotFoundException before.</summary>
        public abstract int AddChdir(IntPtr actions, IntPtr path);

        /// <summary>posix_spawn_file_actions_addclosefrom_np (glibc 2.34+); EntryPointNotFoundException where missing.</summary>
        public abstract int AddCloseFrom(IntPtr actions, int lowFd);

        /// <summary>posix_spawnattr_init.</summary>
        public abstract int AttributesInit(IntPtr attributes);

        /// <summary>posix_spawnattr_destroy.</summary>
        public abstract int AttributesDestroy(IntPtr attributes);

        /// <summary>posix_spawnattr_setflags.</summary>
        public abstract int SetFlags(IntPtr attributes, short flags);

        /// <summary>posix_spawnattr_setsigmask.</summary>
        public abstract int SetSignalMask(IntPtr attributes, IntPtr signals);

        /// <summary>posix_spawnattr_setsigdefault.</summary>
        public abstract int SetSignalDefault(IntPtr attributes, IntPtr signals);

        /// <summary>sigemptyset.</summary>
        public abstract int SignalSetEmpty(IntPtr signals);

        /// <summary>sigaddset.</summary>
        public abstract int SignalSetAdd(IntPtr signals, int signal);

        /// <summary>waitpid(2); -1 and errno on failure.</summary>
        public abstract int WaitPid(int pid, out int status, int options);

        /// <summary>kill(2); -1 and errno on failure.</summary>
        public abstract int Kill(int pid, int signal);

        /// <summary>getpid(2).</summary>
        public abstract int GetPid();

        /// <summary>chmod(2).</summary>
        public abstract int Chmod(IntPtr path, int mode);

        /// <summary>access(2).</summary>
        public abstract int Access(IntPtr path, int mode);

        /// <summary>readlink(2): the length written, or -1.</summary>
        public abstract long ReadLink(IntPtr path, byte[] buffer, long size);

        /// <summary>symlink(2).</summary>
        public abstract int Symlink(IntPtr target, IntPtr link);

        /// <summary>The errno of the last call made with SetLastError.</summary>
        public abstract int LastError { get; }

        /// <summary>
        /// Reaps `pid` if it is this process's child and has ended: true with its exit status (exit code, or 128 + the
        /// signal that killed it); false while it runs. `gone` is true when it is no child of this process (ECHILD).
        /// </summary>
        public bool TryReap(int pid, out int exitCode, out bool gone)
        {
            exitCode = -1;
            gone = false;
            int status;
            int result = WaitPid(pid, out status, WaitNoHang);
            if (result == pid)
            {
                exitCode = DecodeStatus(status);
                return true;
            }
            if (result < 0 && LastError == NoChild) gone = true;
            return false;
        }

        /// <summary>An exit status as a shell reports it: the exit code, or 128 + the signal that ended the process.</summary>
        public static int DecodeStatus(int status)
        {
            int signal = status & 0x7f;
            return signal == 0 ? (status >> 8) & 0xff : 128 + signal;
        }

        private static Libc Choose()
        {
#if !UNITY_5_3_OR_NEWER
            if (Platform.IsWindows) return null;
            return Platform.IsMac ? (Libc)new MacLibc() : new LinuxLibc();
#elif UNITY_EDITOR_WIN
            return null;
#elif UNITY_EDITOR_OSX
            return new MacLibc();
#elif UNITY_EDITOR_LINUX
            return new LinuxLibc();
#elif UNITY_STANDALONE_OSX
            return new MacLibc();
#elif UNITY_STANDALONE_LINUX
            return new LinuxLibc();
#else
            return null;
#endif
        }
    }
}
