// The downloads' confined folders (internal to CoreAI.Hosting), driven from pytest: both kinds on this machine, the
// descriptor one (Linux, macOS) and the by-path one Windows uses (Mono here reports a link as a reparse point, as
// Windows does).
using System;
using System.IO;
using CoreAI.Launcher;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>Calls into ConfinedFolder with plain arguments pythonnet can pass; `byPath` picks the Windows kind.</summary>
    public static class FolderProbe
    {
        /// <summary>fstat of the file at `path` as the package decodes it: device, inode, mode, size.</summary>
        public static long[] Fstat(string path)
        {
            Libc lib = Libc.Current;
            int fd;
            using (NativeMemory memory = new NativeMemory())
                fd = lib.OpenAt(lib.Files.AtWorkingFolder, memory.Utf8(path), FileConstants.ReadOnly | lib.Files.NonBlock, 0);
            if (fd < 0) throw new IOException("open failed, errno " + lib.LastError);
            try
            {
                FileStatus status;
                if (!lib.Fstat(fd, out status)) throw new IOException("fstat failed, errno " + lib.LastError);
                return new[] { (long)status.Device, (long)status.Inode, status.Mode, status.Size };
            }
            finally
            {
                lib.Close(fd);
            }
        }

        /// <summary>What the folder's disk has free for this user, as the downloads see it.</summary>
        public static long FreeBytes(string folder, bool byPath)
        {
            using (ConfinedFolder opened = Open(folder, false, byPath)) return opened.FreeBytes();
        }

        /// <summary>Opens (creating) the folder: `replaceLink` removes a link or file in its place.</summary>
        public static void OpenFolder(string folder, bool replaceLink, bool byPath)
        {
            Open(folder, replaceLink, byPath).Dispose();
        }

        /// <summary>What is at `name`: None, Regular, Folder or Other.</summary>
        public static string Look(string folder, string name, bool byPath)
        {
            long size;
            using (ConfinedFolder opened = Open(folder, false, byPath)) return opened.Look(name, out size).ToString();
        }

        /// <summary>Appends `data` to `name` (created when missing).</summary>
        public static void Append(string folder, string name, byte[] data, bool byPath)
        {
            using (ConfinedFolder opened = Open(folder, false, byPath))
            using (Stream stream = opened.OpenAppend(name))
                stream.Write(data, 0, data.Length);
        }

        /// <summary>The bytes of `name`, or null (none, not a regular file, over `limit`).</summary>
        public static byte[] ReadSmall(string folder, string name, int limit, bool byPath)
        {
            using (ConfinedFolder opened = Open(folder, false, byPath)) return opened.ReadSmall(name, limit);
        }

        /// <summary>Replaces `name` by `data`.</summary>
        public static void WriteAtomically(string folder, string name, byte[] data, bool byPath)
        {
            using (ConfinedFolder opened = Open(folder, false, byPath)) opened.WriteAtomically(name, data);
        }

        /// <summary>Deletes the entry `name`; false when there was none.</summary>
        public static bool Delete(string folder, string name, bool byPath)
        {
            using (ConfinedFolder opened = Open(folder, false, byPath)) return opened.Delete(name);
        }

        /// <summary>Renames `name` in `folder` to `targetName` in `target`.</summary>
        public static void Move(string folder, string name, string target, string targetName, bool byPath)
        {
            using (ConfinedFolder from = Open(folder, false, byPath))
            using (ConfinedFolder to = Open(target, false, byPath))
                from.MoveTo(name, to, targetName);
        }

        /// <summary>The lock file `name`, held until disposed; null when another holds it.</summary>
        public static IDisposable TryLock(string folder, string name, bool byPath)
        {
            ConfinedFolder opened = Open(folder, false, byPath);
            IDisposable held = opened.TryLock(name);
            if (held == null)
            {
                opened.Dispose();
                return null;
            }
            return new Both(held, opened);
        }

        /// <summary>
        /// `rounds` times: takes the lock file `name`, adds one to the number in `counter` (a read-modify-write only a real
        /// lock keeps whole), lets the lock go (deleting the file). Returns the number of tries that found it busy.
        /// </summary>
        public static System.Threading.Tasks.Task<int> HammerAsync(string folder, string name, string counter, int rounds)
        {
            return System.Threading.Tasks.Task.Run(() => Hammer(folder, name, counter, rounds));
        }

        private static int Hammer(string folder, string name, string counter, int rounds)
        {
            int busy = 0;
            for (int done = 0; done < rounds;)
            {
                IDisposable held = TryLock(folder, name, false);
                if (held == null)
                {
                    busy++;
                    System.Threading.Thread.Sleep(0);
                    continue;
                }
                using (held)
                {
                    int value = int.Parse(File.ReadAllText(counter));
                    System.Threading.Thread.Sleep(1);
                    File.WriteAllText(counter, (value + 1).ToString());
                    done++;
                }
            }
            return busy;
        }

        private static ConfinedFolder Open(string folder, bool replaceLink, bool byPath)
        {
            return byPath ? (ConfinedFolder)PathFolder.Open(Path.GetFullPath(folder), replaceLink) : ConfinedFolder.Open(folder, replaceLink);
        }

        private sealed class Both : IDisposable
        {
            private readonly IDisposable first;
            private readonly IDisposable second;

            public Both(IDisposable first, IDisposable second)
            {
                this.first = first;
                this.second = second;
            }

            public void Dispose()
            {
                first.Dispose();
                second.Dispose();
            }
        }
    }
}
