using System;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// A folder whose files are named relative to it and never reached through a link: a link, FIFO or other special
    /// file at a name the package writes is removed (what a link points to is never touched), only regular files are
    /// read or written, new files are created exclusively, and renames and deletes act on the entry itself. On Linux
    /// and macOS the folder is held by descriptor (openat with O_NOFOLLOW: <see cref="DescriptorFolder"/>); on Windows,
    /// which has no such calls, the same checks are made by path (FileAttributes.ReparsePoint: <see cref="PathFolder"/>),
    /// where a swap between the check and the open is not excluded.
    /// </summary>
    internal abstract class ConfinedFolder : IDisposable
    {
        /// <summary>What is at a name.</summary>
        public enum Entry
        {
            None,
            Regular,
            Folder,
            /// <summary>A link, FIFO, socket or device: never opened, removed where the package writes.</summary>
            Other,
        }

        /// <summary>The folder's path (for messages and for callers that need a path, such as a validator).</summary>
        public string Path { get; protected set; }

        /// <summary>
        /// Opens the folder at `path`, creating it when missing. `replaceLink`: the folder is the package's own (a partial
        /// downloads folder) and a link or file in its place is removed first; otherwise it is trusted as given (the
        /// user's models folder, a link the user made included).
        /// </summary>
        public static ConfinedFolder Open(string path, bool replaceLink)
        {
            string full = System.IO.Path.GetFullPath(path);
            Libc lib = Libc.Current;
            return lib != null ? (ConfinedFolder)DescriptorFolder.Open(lib, full, replaceLink) : PathFolder.Open(full, replaceLink);
        }

        /// <summary>What is at `name` and, for a regular file, its size.</summary>
        public abstract Entry Look(string name, out long size);

        /// <summary>The size of the regular file `name`; 0 when there is none (or something else is there).</summary>
        public long SizeOf(string name)
        {
            long size;
            return Look(name, out size) == Entry.Regular ? size : 0;
        }

        /// <summary>The bytes of the regular file `name` of at most `limit` bytes; null when there is none, it is something else, or larger.</summary>
        public abstract byte[] ReadSmall(string name, int limit);

        /// <summary>The regular file `name` opened for reading; null when there is none or something else is there.</summary>
        public abstract Stream OpenRead(string name);

        /// <summary>
        /// The regular file `name` opened for appending (created when missing); anything else at the name is removed first
        /// (a link, never its target). IOException when a folder is there.
        /// </summary>
        public abstract Stream OpenAppend(string name);

        /// <summary>Replaces `name` by a new file holding `data` (a temporary file renamed over it: a link there is replaced, never written through).</summary>
        public abstract void WriteAtomically(string name, byte[] data);

        /// <summary>Deletes the entry `name` itself (a link, never its target); false when there was none. IOException for a folder.</summary>
        public abstract bool Delete(string name);

        /// <summary>
        /// Renames `name` to `targetName` in `target` (a folder opened the same way), replacing what is there; IOException
        /// (and nothing left at the target) when what arrived there is not a regular file.
        /// </summary>
        public abstract void MoveTo(string name, ConfinedFolder target, string targetName);

        /// <summary>
        /// Takes the lock file `name` (created when missing) without waiting: null when another process (or download)
        /// holds it. Disposing the lock deletes the file while still holding it.
        /// </summary>
        public abstract IDisposable TryLock(string name);

        /// <summary>The bytes this user may still write on the folder's disk; -1 when the OS does not say.</summary>
        public abstract long FreeBytes();

        /// <summary>Lets the folder go.</summary>
        public abstract void Dispose();

        /// <summary>The error for a folder found where a file of the package belongs.</summary>
        protected IOException FolderInTheWay(string name)
        {
            return new IOException("a folder is where " + name + " belongs, in " + Path + "; remove it");
        }

        /// <summary>Everything `stream` holds, or null once it passes `limit` bytes (a file that grew while it was read).</summary>
        protected static byte[] ReadBounded(Stream stream, int limit)
        {
            byte[] buffer = new byte[limit + 1];
            int total = 0;
            int read;
            while (total < buffer.Length && (read = stream.Read(buffer, total, buffer.Length - total)) > 0) total += read;
            if (total > limit) return null;
            byte[] data = new byte[total];
            Array.Copy(buffer, data, total);
            return data;
        }

        /// <summary>A new temporary file name in the folder: `.&lt;8 hex&gt;.tmp`.</summary>
        protected static string TemporaryName()
        {
            return "." + Guid.NewGuid().ToString("N").Substring(0, 8) + ".tmp";
        }

        /// <summary>Throws unless `name` is a plain file name (no folder part): every name here is relative to the folder.</summary>
        protected static void CheckName(string name)
        {
            if (string.IsNullOrEmpty(name) || name.IndexOf('/') >= 0 || name.IndexOf('\\') >= 0 || name == "." || name == "..")
                throw new ArgumentException("not a file name: '" + name + "'");
        }
    }
}
