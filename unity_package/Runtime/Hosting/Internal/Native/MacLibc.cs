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

        public override FileConstants Files
        {
            get { return FileConstants.Mac; }
        }

        public override int OpenAt(int folder, IntPtr path, int flags, int mode)
        {
            // openat is variadic, and Apple's arm64 ABI passes variadic arguments on the stack, where a fixed argument
            // list puts the mode in a register: the mode goes in both places (the padding fills the other registers).
            return openat(folder, path, flags, mode, 0, 0, 0, 0, mode);
        }

        public override int Close(int fd) { return close(fd); }
        public override long Read(int fd, IntPtr buffer, long count) { return (long)read(fd, buffer, (IntPtr)count); }
        public override long Write(int fd, IntPtr buffer, long count) { return (long)write(fd, buffer, (IntPtr)count); }
        public override int Fsync(int fd) { return fsync(fd); }
        public override int Fchmod(int fd, int mode) { return fchmod(fd, mode); }
        public override int Flock(int fd, int operation) { return flock(fd, operation); }
        public override int UnlinkAt(int folder, IntPtr path) { return unlinkat(folder, path, 0); }
        public override int RenameAt(int fromFolder, IntPtr from, int toFolder, IntPtr to) { return renameat(fromFolder, from, toFolder, to); }

        public override bool Fstat(int fd, out FileStatus status)
        {
            byte[] buffer = new byte[BufferSize];
            status = new FileStatus();
            // The 64-bit-inode struct stat (fstat$INODE64 on x86_64, plain fstat on arm64): st_dev (4 bytes), st_mode
            // (2), st_nlink (2), st_ino (8) at 8, ... st_size at 96.
            int result = RuntimeInformation.ProcessArchitecture == Architecture.Arm64 ? fstat(fd, buffer) : fstat_inode64(fd, buffer);
            if (result != 0) return false;
            status.Device = BitConverter.ToUInt32(buffer, 0);
            status.Mode = BitConverter.ToUInt16(buffer, 4);
            status.Inode = BitConverter.ToUInt64(buffer, 8);
            status.Size = BitConverter.ToInt64(buffer, 96);
            return true;
        }

        public override long FreeBytes(int fd)
        {
            byte[] buffer = new byte[BufferSize];
            // The 64-bit struct statfs: f_bsize (4 bytes), f_iosize (4), f_blocks, f_bfree, f_bavail (8 each, from 8).
            // Not fstatvfs: its block counts are 32-bit and overflow on today's disks.
            int result = RuntimeInformation.ProcessArchitecture == Architecture.Arm64 ? fstatfs(fd, buffer) : fstatfs_inode64(fd, buffer);
            if (result != 0) return -1;
            ulong available = BitConverter.ToUInt64(buffer, 24) * BitConverter.ToUInt32(buffer, 0);
            return available > long.MaxValue ? long.MaxValue : (long)available;
        }

        private const int BufferSize = 4096;  // larger than struct stat (144 bytes) and struct statfs (2168)

        [DllImport(Lib, SetLastError = true)] private static extern int openat(int folder, IntPtr path, int flags, int mode,
            long pad4, long pad5, long pad6, long pad7, long stackMode);
        [DllImport(Lib, SetLastError = true)] private static extern int close(int fd);
        [DllImport(Lib, SetLastError = true)] private static extern IntPtr read(int fd, IntPtr buffer, IntPtr count);
        [DllImport(Lib, SetLastError = true)] private static extern IntPtr write(int fd, IntPtr buffer, IntPtr count);
        [DllImport(Lib, SetLastError = true)] private static extern int fsync(int fd);
        [DllImport(Lib, SetLastError = true)] private static extern int fchmod(int fd, int mode);
        [DllImport(Lib, SetLastError = true)] private static extern int flock(int fd, int operation);
        [DllImport(Lib, SetLastError = true)] private static extern int unlinkat(int folder, IntPtr path, int flags);
        [DllImport(Lib, SetLastError = true)] private static extern int renameat(int fromFolder, IntPtr from, int toFolder, IntPtr to);
        [DllImport(Lib, SetLastError = true)] private static extern int fstat(int fd, [Out] byte[] buffer);
        [DllImport(Lib, SetLastError = true, EntryPoint = "fstat$INODE64")] private static extern int fstat_inode64(int fd, [Out] byte[] buffer);
        [DllImport(Lib, SetLastError = true)] private static extern int fstatfs(int fd, [Out] byte[] buffer);
        [DllImport(Lib, SetLastError = true, EntryPoint = "fstatfs$INODE64")] private static extern int fstatfs_inode64(int fd, [Out] byte[] buffer);

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
