using System;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// A <see cref="ConfinedFolder"/> checked by path (Windows, or wherever no C library binding is compiled): before a
    /// file is opened its own attributes are read (GetFileAttributes does not follow a link), and a reparse point (a
    /// symbolic link or junction) is removed, never opened; Windows has no FIFOs at file names. A swap between the check
    /// and the open is not excluded here. Lock files are opened with FileShare.None and deleted on close, which Windows
    /// enforces across processes (and the runtime's filelock respects).
    /// </summary>
    internal sealed class PathFolder : ConfinedFolder
    {
        private const int Tries = 8;

        private PathFolder(string path)
        {
            Path = path;
        }

        /// <summary>Opens (creating) the folder at the full path `path`; see <see cref="ConfinedFolder.Open"/>.</summary>
        public static PathFolder Open(string path, bool replaceLink)
        {
            if (replaceLink)
            {
                FileAttributes? attributes = AttributesOf(path);
                if (attributes != null && (IsLink(attributes.Value) || (attributes.Value & FileAttributes.Directory) == 0))
                    RemoveEntry(path, attributes.Value);
            }
            Directory.CreateDirectory(path);
            return new PathFolder(path);
        }

        public override Entry Look(string name, out long size)
        {
            size = 0;
            FileAttributes? attributes = AttributesOf(Full(name));
            if (attributes == null) return Entry.None;
            if (IsLink(attributes.Value) || (attributes.Value & FileAttributes.Device) != 0) return Entry.Other;
            if ((attributes.Value & FileAttributes.Directory) != 0) return Entry.Folder;
            try
            {
                size = new FileInfo(Full(name)).Length;
            }
            catch (FileNotFoundException)
            {
                return Entry.None;
            }
            return Entry.Regular;
        }

        public override byte[] ReadSmall(string name, int limit)
        {
            long size;
            if (Look(name, out size) != Entry.Regular || size > limit) return null;
            using (Stream stream = OpenRead(name)) return stream == null ? null : ReadBounded(stream, limit);
        }

        public override Stream OpenRead(string name)
        {
            long size;
            if (Look(name, out size) != Entry.Regular) return null;
            try
            {
                return new FileStream(Full(name), FileMode.Open, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete);
            }
            catch (FileNotFoundException)
            {
                return null;
            }
        }

        public override Stream OpenAppend(string name)
        {
            ClearTheWay(name);
            return new FileStream(Full(name), FileMode.Append, FileAccess.Write, FileShare.Read);
        }

        public override void WriteAtomically(string name, byte[] data)
        {
            CheckName(name);
            string temp = Full(TemporaryName());
            try
            {
                using (FileStream stream = new FileStream(temp, FileMode.CreateNew, FileAccess.Write, FileShare.None))
                {
                    stream.Write(data, 0, data.Length);
                    stream.Flush(true);
                }
                Replace(temp, name);
            }
            finally
            {
                if (File.Exists(temp)) File.Delete(temp);
            }
        }

        public override bool Delete(string name)
        {
            string full = Full(name);
            FileAttributes? attributes = AttributesOf(full);
            if (attributes == null) return false;
            if (!IsLink(attributes.Value) && (attributes.Value & FileAttributes.Directory) != 0) throw FolderInTheWay(name);
            RemoveEntry(full, attributes.Value);
            return true;
        }

        public override void MoveTo(string name, ConfinedFolder target, string targetName)
        {
            PathFolder to = target as PathFolder;
            if (to == null) throw new ArgumentException("the target folder is not checked by path");
            to.Replace(Full(name), targetName);
            long size;
            if (to.Look(targetName, out size) != Entry.Regular)
            {
                to.Delete(targetName);
                throw new IOException(name + " was replaced by something other than a file while it was moved; it was deleted");
            }
        }

        public override IDisposable TryLock(string name)
        {
            ClearTheWay(name);
            try
            {
                return new FileStream(Full(name), FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.None, 1, FileOptions.DeleteOnClose);
            }
            catch (IOException)
            {
                return null;  // a sharing violation: another download holds it
            }
        }

        public override long FreeBytes()
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || (UNITY_STANDALONE_WIN && !UNITY_EDITOR)
            if (!Platform.IsWindows) return -1;
            using (NativeMemory memory = new NativeMemory())
            {
                ulong available;
                ulong total;
                ulong totalFree;
                if (!Kernel32.GetDiskFreeSpaceEx(memory.Utf16(Path), out available, out total, out totalFree)) return -1;
                return available > long.MaxValue ? long.MaxValue : (long)available;
            }
#else
            return -1;
#endif
        }

        public override void Dispose()
        {
        }

        /// <summary>Moves the file at the full path `source` onto `name` here (replacing a file; a link or special file there is removed first).</summary>
        private void Replace(string source, string name)
        {
            ClearTheWay(name);
            string full = Full(name);
            if (File.Exists(full)) File.Replace(source, full, null);
            else File.Move(source, full);
        }

        /// <summary>Removes a link, special file or read-only file at `name` (never a link's target) before it is written; IOException for a folder.</summary>
        private void ClearTheWay(string name)
        {
            for (int attempt = 0; attempt < Tries; attempt++)
            {
                long size;
                Entry entry = Look(name, out size);
                if (entry == Entry.None) return;
                if (entry == Entry.Folder) throw FolderInTheWay(name);
                if (entry == Entry.Regular && (File.GetAttributes(Full(name)) & FileAttributes.ReadOnly) == 0) return;
                Delete(name);
            }
            throw new IOException(name + " in " + Path + " keeps changing while it is opened");
        }

        private string Full(string name)
        {
            CheckName(name);
            return System.IO.Path.Combine(Path, name);
        }

        private static bool IsLink(FileAttributes attributes)
        {
            return (attributes & FileAttributes.ReparsePoint) != 0;
        }

        /// <summary>The entry's own attributes (a link's, not its target's); null when there is none.</summary>
        private static FileAttributes? AttributesOf(string path)
        {
            try
            {
                return File.GetAttributes(path);
            }
            catch (FileNotFoundException)
            {
                return null;
            }
            catch (DirectoryNotFoundException)
            {
                return null;
            }
        }

        /// <summary>Deletes the entry itself: a link to a folder (or a junction) with Directory.Delete, which removes only the link.</summary>
        private static void RemoveEntry(string path, FileAttributes attributes)
        {
            if ((attributes & FileAttributes.Directory) != 0)
            {
                Directory.Delete(path, false);
                return;
            }
            if ((attributes & FileAttributes.ReadOnly) != 0 && !IsLink(attributes)) File.SetAttributes(path, FileAttributes.Normal);  // Windows refuses to delete it otherwise
            File.Delete(path);
        }
    }
}
