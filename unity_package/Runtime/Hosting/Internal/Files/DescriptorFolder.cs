using System;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// A <see cref="ConfinedFolder"/> held by descriptor (Linux, macOS): every file is opened with openat relative to
    /// it, with O_NOFOLLOW (a link answers ELOOP and is never followed) and O_NONBLOCK (a FIFO cannot block the open),
    /// then checked on its own descriptor (fstat), so nothing swapped in between a look and an open is written through.
    /// Lock files follow the runtime's protocol (pyruntime/catalog/lockfile.py), so the runtime and the package exclude
    /// each other: flock(2); the holder deletes the file while it still holds it, and whoever locks a file checks that
    /// the name still leads to that very file.
    /// </summary>
    internal sealed class DescriptorFolder : ConfinedFolder
    {
        private const int DataMode = 0x1A4;  // 0644: a download, as the runtime's cache writes it
        private const int PrivateMode = 0x180;  // 0600: records, manifests and lock files
        private const int LockExclusiveNoWait = 2 | 4;  // LOCK_EX | LOCK_NB (the same on Linux and macOS)
        private const int Tries = 8;
        private readonly Libc lib;
        private readonly FileConstants c;
        private int fd;

        private DescriptorFolder(Libc lib, int fd, string path)
        {
            this.lib = lib;
            c = lib.Files;
            this.fd = fd;
            Path = path;
        }

        /// <summary>Opens (creating) the folder at the full path `path`; see <see cref="ConfinedFolder.Open"/>.</summary>
        public static DescriptorFolder Open(Libc lib, string path, bool replaceLink)
        {
            FileConstants c = lib.Files;
            int flags = FileConstants.ReadOnly | c.Directory | c.NonBlock | c.CloseOnExec | (replaceLink ? c.NoFollow : 0);
            for (int attempt = 0; attempt < Tries; attempt++)
            {
                int error;
                int opened = OpenAt(lib, c.AtWorkingFolder, path, flags, 0, out error);
                if (opened >= 0) return new DescriptorFolder(lib, opened, path);
                if (error == c.NoEntry)
                    Directory.CreateDirectory(path);
                else if (replaceLink && (error == c.Loop || error == c.NotDirectory))
                    Unlink(lib, c.AtWorkingFolder, path, "remove the link or file in place of the folder " + path);
                else if (error != c.Interrupted)
                    throw Failed(lib, "open the folder " + path, error);
            }
            throw new IOException("the folder " + path + " keeps changing while it is opened");
        }

        public override Entry Look(string name, out long size)
        {
            FileStatus status;
            Entry entry = Stat(name, out status);
            size = entry == Entry.Regular ? status.Size : 0;
            return entry;
        }

        public override byte[] ReadSmall(string name, int limit)
        {
            FileStatus status;
            int file = OpenRegular(name, FileConstants.ReadOnly, out status);
            if (file < 0 || status.Size > limit)
            {
                if (file >= 0) lib.Close(file);
                return null;
            }
            using (DescriptorStream stream = new DescriptorStream(lib, file, true)) return ReadBounded(stream, limit);
        }

        public override Stream OpenRead(string name)
        {
            FileStatus status;
            int file = OpenRegular(name, FileConstants.ReadOnly, out status);
            return file < 0 ? null : new DescriptorStream(lib, file, true);
        }

        public override Stream OpenAppend(string name)
        {
            FileStatus status;
            return new DescriptorStream(lib, OpenOrCreate(name, FileConstants.WriteOnly | c.Append, DataMode, out status), false);
        }

        public override void WriteAtomically(string name, byte[] data)
        {
            CheckName(name);
            string temp = null;
            int file = -1;
            for (int attempt = 0; file < 0; attempt++)
            {
                int error;
                temp = TemporaryName();
                file = OpenAt(lib, fd, temp, FileConstants.WriteOnly | c.Create | c.Exclusive | c.NoFollow | c.CloseOnExec, PrivateMode, out error);
                if (file < 0 && (error != c.Exists || attempt >= Tries)) throw Failed(lib, "create a temporary file in " + Path, error);
            }
            bool renamed = false;
            try
            {
                lib.Fchmod(file, PrivateMode);
                using (DescriptorStream stream = new DescriptorStream(lib, file, false))
                {
                    stream.Write(data, 0, data.Length);
                    stream.Flush();
                }
                Rename(fd, temp, fd, name);
                renamed = true;
                lib.Fsync(fd);  // the rename survives a crash only once the folder is synced
            }
            finally
            {
                if (!renamed) TryUnlink(temp);
            }
        }

        public override bool Delete(string name)
        {
            CheckName(name);
            int error;
            if (UnlinkAt(lib, fd, name, out error) == 0) return true;
            if (error == c.NoEntry) return false;
            FileStatus status;
            if (Stat(name, out status) == Entry.Folder) throw FolderInTheWay(name);
            throw Failed(lib, "delete " + name + " in " + Path, error);
        }

        public override void MoveTo(string name, ConfinedFolder target, string targetName)
        {
            CheckName(name);
            CheckName(targetName);
            DescriptorFolder to = target as DescriptorFolder;
            if (to == null) throw new ArgumentException("the target folder is not held by descriptor");
            Rename(fd, name, to.fd, targetName);
            FileStatus status;
            if (to.Stat(targetName, out status) != Entry.Regular)
            {
                to.Delete(targetName);
                throw new IOException(name + " was replaced by something other than a file while it was moved; it was deleted");
            }
            lib.Fsync(to.fd);
        }

        public override IDisposable TryLock(string name)
        {
            for (int attempt = 0; attempt < Tries; attempt++)
            {
                FileStatus held;
                int file = OpenOrCreate(name, FileConstants.ReadOnly, PrivateMode, out held);
                if (lib.Flock(file, LockExclusiveNoWait) != 0)
                {
                    int error = lib.LastError;
                    lib.Close(file);
                    if (error == c.WouldBlock) return null;
                    if (error == c.Interrupted) continue;
                    throw Failed(lib, "lock " + name + " in " + Path, error);
                }
                FileStatus now;
                if (Stat(name, out now) == Entry.Regular && now.SameFileAs(held)) return new HeldLock(this, name, file);
                lib.Close(file);  // its holder deleted it after we opened it: that file is nobody's lock any more
            }
            return null;  // replaced faster than it can be taken: someone holds it
        }

        public override long FreeBytes()
        {
            return lib.FreeBytes(fd);
        }

        public override void Dispose()
        {
            if (fd < 0) return;
            lib.Close(fd);
            fd = -1;
        }

        /// <summary>What is at `name` (its own status: a link is Other, never followed); opened read-only and non-blocking to look.</summary>
        private Entry Stat(string name, out FileStatus status)
        {
            status = new FileStatus();
            CheckName(name);
            int error;
            int file = OpenAt(lib, fd, name, FileConstants.ReadOnly | c.NoFollow | c.NonBlock | c.CloseOnExec, 0, out error);
            if (file < 0)
            {
                if (error == c.NoEntry) return Entry.None;
                if (error == c.Loop || error == c.Denied || error == c.NoReader) return Entry.Other;  // a link, a socket, or unreadable
                throw Failed(lib, "look at " + name + " in " + Path, error);
            }
            try
            {
                if (!lib.Fstat(file, out status)) throw Failed(lib, "look at " + name + " in " + Path, lib.LastError);
            }
            finally
            {
                lib.Close(file);
            }
            return status.IsRegular ? Entry.Regular : status.IsDirectory ? Entry.Folder : Entry.Other;
        }

        /// <summary>A descriptor of the regular file `name` (`status`: its fstat), or -1 when there is none or something else is there.</summary>
        private int OpenRegular(string name, int flags, out FileStatus status)
        {
            int error;
            return OpenRegular(name, flags, out status, out error);
        }

        private int OpenRegular(string name, int flags, out FileStatus status, out int error)
        {
            status = new FileStatus();
            CheckName(name);
            int file = OpenAt(lib, fd, name, flags | c.NoFollow | c.NonBlock | c.CloseOnExec, 0, out error);
            if (file < 0)
            {
                if (error == c.NoEntry || error == c.Loop || error == c.Denied || error == c.NoReader) return -1;
                throw Failed(lib, "open " + name + " in " + Path, error);
            }
            if (lib.Fstat(file, out status) && status.IsRegular) return file;
            lib.Close(file);
            return -1;
        }

        /// <summary>
        /// A descriptor of the regular file `name`, created (exclusively, with `mode`) when missing; a link, FIFO or other
        /// special file at the name is removed first (a link, never its target). IOException for a folder there.
        /// </summary>
        private int OpenOrCreate(string name, int flags, int mode, out FileStatus status)
        {
            CheckName(name);
            for (int attempt = 0; attempt < Tries; attempt++)
            {
                int error;
                int file = OpenAt(lib, fd, name, flags | c.Create | c.Exclusive | c.NoFollow | c.CloseOnExec, mode, out error);
                if (file >= 0)
                {
                    // The mode once more: openat is variadic, and its mode is the one argument whose passing differs by ABI.
                    lib.Fchmod(file, mode);
                    if (lib.Fstat(file, out status)) return file;
                    error = lib.LastError;
                    lib.Close(file);
                    throw Failed(lib, "create " + name + " in " + Path, error);
                }
                if (error != c.Exists) throw Failed(lib, "create " + name + " in " + Path, error);
                FileStatus looked;
                switch (Stat(name, out looked))
                {
                    case Entry.Regular:
                        file = OpenRegular(name, flags, out status, out error);
                        if (file >= 0 && status.SameFileAs(looked)) return file;
                        if (file >= 0) lib.Close(file);
                        else if (error == c.Denied) Delete(name);  // a file this user may not write (planted read-only)
                        break;  // else changed between the look and the open: look again
                    case Entry.Folder:
                        throw FolderInTheWay(name);
                    case Entry.Other:
                        Delete(name);
                        break;
                }
            }
            throw new IOException(name + " in " + Path + " keeps changing while it is opened");
        }

        private void Rename(int fromFolder, string from, int toFolder, string to)
        {
            using (NativeMemory memory = new NativeMemory())
            {
                if (lib.RenameAt(fromFolder, memory.Utf8(from), toFolder, memory.Utf8(to)) != 0)
                    throw Failed(lib, "rename " + from + " to " + to + " in " + Path, lib.LastError);
            }
        }

        private void TryUnlink(string name)
        {
            int error;
            UnlinkAt(lib, fd, name, out error);
        }

        private static int OpenAt(Libc lib, int folder, string name, int flags, int mode, out int error)
        {
            using (NativeMemory memory = new NativeMemory())
            {
                int opened = lib.OpenAt(folder, memory.Utf8(name), flags, mode);
                error = opened < 0 ? lib.LastError : 0;
                return opened;
            }
        }

        private static int UnlinkAt(Libc lib, int folder, string name, out int error)
        {
            using (NativeMemory memory = new NativeMemory())
            {
                int result = lib.UnlinkAt(folder, memory.Utf8(name));
                error = result != 0 ? lib.LastError : 0;
                return result;
            }
        }

        private static void Unlink(Libc lib, int folder, string path, string what)
        {
            int error;
            if (UnlinkAt(lib, folder, path, out error) != 0 && error != lib.Files.NoEntry) throw Failed(lib, what, error);
        }

        private static IOException Failed(Libc lib, string what, int error)
        {
            if (error == lib.Files.NoSpace || error == lib.Files.QuotaExceeded) return new DiskFullException("cannot " + what + ": the disk is full");
            return new IOException("cannot " + what + " (errno " + error + ")");
        }

        /// <summary>A held lock file: disposing it deletes the file, then lets the lock go.</summary>
        private sealed class HeldLock : IDisposable
        {
            private readonly DescriptorFolder folder;
            private readonly string name;
            private int file;

            public HeldLock(DescriptorFolder folder, string name, int file)
            {
                this.folder = folder;
                this.name = name;
                this.file = file;
            }

            public void Dispose()
            {
                if (file < 0) return;
                try
                {
                    folder.TryUnlink(name);  // still holding it: whoever opened this file sees it gone and tries again
                }
                finally
                {
                    folder.lib.Close(file);  // releases the lock
                    file = -1;
                }
            }
        }
    }
}
