#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_OSX || (UNITY_STANDALONE_OSX && !UNITY_EDITOR)
using System;
using System.Runtime.InteropServices;

namespace CoreAI.Launcher
{
    /// <summary>macOS's C library, `/usr/lib/libSystem.dylib` (an absolute path: found in the dyld cache by Mono and IL2CPP alike).</summary>
    internal sealed class MacLibc : Libc
    {
        private const string Lib = "/usr/lib/libSystem.dylib";

        public override int AppendFlags
        {
            get { return 0x1 | 0x200 | 0x8; }  // O_WRONLY | O_CREAT | O_APPEND (BSD values)
        }

        public override short CloseOnExecDefault
        {
            get { return 0x4000; }  // POSIX_SPAWN_CLOEXEC_DEFAULT: only the descriptors the file actions set reach the child
        }

        public override int LastError
        {
            get { return Marshal.GetLastWin32Error(); }
        }

        public override int Spawn(out int pid, IntPtr path, IntPtr fileActions, IntPtr attributes, IntPtr argv, IntPtr envp)
        {
            return posix_spawn(out pid, path, fileActions, attributes, argv, envp);
        }

        public override int FileActionsInit(IntPtr actions) { return posix_spawn_file_actions_init(actions); }
        public override int FileActionsDestroy(IntPtr actions) { return posix_spawn_file_actions_destroy(actions); }
        public override int AddOpen(IntPtr actions, int fd, IntPtr path, int flags, int mode) { return posix_spawn_file_actions_addopen(actions, fd, path, flags, mode); }
        public override int AddDup2(IntPtr actions, int fd, int newFd) { return posix_spawn_file_actions_adddup2(actions, fd, newFd); }
        public override int AddClose(IntPtr actions, int fd) { return posix_spawn_file_actions_addclose(actions, fd); }
        public override int AddChdir(IntPtr actions, IntPtr path) { return posix_spawn_file_actions_addchdir_np(actions, path); }
        public override int AddCloseFrom(IntPtr actions, int lowFd)
        {
            throw new EntryPointNotFoundException("macOS has no posix_spawn_file_actions_addclosefrom_np (CloseOnExecDefault does it)");
        }
        public override int AttributesInit(IntPtr attributes) { return posix_spawnattr_init(attributes); }
        public override int AttributesDestroy(IntPtr attributes) { return posix_spawnattr_destroy(attributes); }
        public override int SetFlags(IntPtr attributes, short flags) { return posix_spawnattr_setflags(attributes, flags); }
        public override int SetSignalMask(IntPtr attributes, IntPtr signals) { return posix_spawnattr_setsigmask(attributes, signals); }
        public override int SetSignalDefault(IntPtr attributes, IntPtr signals) { return posix_spawnattr_setsigdefault(attributes, signals); }
        public override int SignalSetEmpty(IntPtr signals) { return sigemptyset(signals); }
        public override int SignalSetAdd(IntPtr signals, int signal) { return sigaddset(signals, signal); }
        public override int WaitPid(int pid, out int status, int options) { return waitpid(pid, out status, options); }
        public override int Kill(int pid, int signal) { return kill(pid, signal); }
        public override int GetPid() { return getpid(); }
        public override int Chmod(IntPtr path, int mode) { return chmod(path, mode); }
        public override int Access(IntPtr path, int mode) { return access(path, mode); }
        public override long ReadLink(IntPtr path, byte[] buffer, long size) { return (long)readlink(path, buffer, (IntPtr)size); }
        public override int Symlink(IntPtr target, IntPtr link) { return symlink(target, link); }

        [DllImport(Lib)] private static extern int posix_spawn(out int pid, IntPtr path, IntPtr fileActions, IntPtr attributes, IntPtr argv, IntPtr envp);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_init(IntPtr actions);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_destroy(IntPtr actions);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_addopen(IntPtr actions, int fd, IntPtr path, int flags, int mode);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_adddup2(IntPtr actions, int fd, int newFd);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_addclose(IntPtr actions, int fd);
        [DllImport(Lib)] private static extern int posix_spawn_file_actions_addchdir_np(IntPtr actions, IntPtr path);
        [DllImport(Lib)] private static extern int posix_spawnattr_init(IntPtr attributes);
        [DllImport(Lib)] private static extern int posix_spawnattr_destroy(IntPtr attributes);
        [DllImport(Lib)] private static extern int posix_spawnattr_setflags(IntPtr attributes, short flags);
        [DllImport(Lib)] private static extern int posix_spawnattr_setsigmask(IntPtr attributes, IntPtr signals);
        [DllImport(Lib)] private static extern int posix_spawnattr_setsigdefault(IntPtr attributes, IntPtr signals);
        [DllImport(Lib)] private static extern int sigemptyset(IntPtr signals);
        [DllImport(Lib)] private static extern int sigaddset(IntPtr signals, int signal);
        [DllImport(Lib, SetLastError = true)] private static extern int waitpid(int pid, out int status, int options);
        [DllImport(Lib, SetLastError = true)] private static extern int kill(int pid, int signal);
        [DllImport(Lib)] private static extern int getpid();
        [DllImport(Lib, SetLastError = true)] private static extern int chmod(IntPtr path, int mode);
        [DllImport(Lib, SetLastError = true)] private static extern int access(IntPtr path, int mode);
        [DllImport(Lib, SetLastError = true)] private static extern IntPtr readlink(IntPtr path, byte[] buffer, IntPtr size);
        [DllImport(Lib, SetLastError = true)] private static extern int symlink(IntPtr target, IntPtr link);
        [DllImport(Lib)] private static extern int sysctlbyname(IntPtr name, out int value, ref IntPtr size, IntPtr newValue, IntPtr newSize);

        /// <summary>
        /// True when this process is an x64 build running on Apple Silicon under Rosetta 2 (sysctl.proc_translated = 1):
        /// the machine is arm64 even though the process, and RuntimeInformation.OSArchitecture under Mono, say x64.
        /// An Intel Mac has no such key (ENOENT): false.
        /// </summary>
        public static bool IsTranslated()
        {
            using (NativeMemory memory = new NativeMemory())
            {
                int value;
                IntPtr size = (IntPtr)4;
                return sysctlbyname(memory.Utf8("sysctl.proc_translated"), out value, ref size, IntPtr.Zero, IntPtr.Zero) == 0 && value == 1;
            }
        }
    }
}
#endif
