using System;
using System.IO;
using System.Security.Cryptography;
using CoreAI.Launcher;

namespace CoreAI.Downloads
{
    /// <summary>
    /// The files of one download in its partial folder, with its lock held: `&lt;file&gt;.partial` (the bytes so far),
    /// `&lt;file&gt;.partial.json` (which file they are: <see cref="RemoteFile"/>) and `&lt;file&gt;.partial.lock` (held
    /// while a download or a removal works on them, deleted when it ends), the runtime's layout. Bytes without a record
    /// are never resumed. Every file is reached through a <see cref="ConfinedFolder"/>: a link, FIFO or other special
    /// file planted at one of these names is removed, never written through. Files only; the HTTP is DownloadFetch's.
    /// </summary>
    internal sealed class PartialDownload : IDisposable
    {
        public const string PartialSuffix = ".partial";
        public const string RecordSuffix = ".partial.json";
        public const string LockSuffix = ".partial.lock";
        private const int MaxRecordBytes = 4096;
        private const int HashBlock = 1 << 20;

        private readonly ConfinedFolder folder;
        private readonly IDisposable held;
        private readonly string bytesName;
        private readonly string recordName;

        private PartialDownload(ConfinedFolder folder, IDisposable held, string fileName)
        {
            this.folder = folder;
            this.held = held;
            bytesName = fileName + PartialSuffix;
            recordName = fileName + RecordSuffix;
        }

        /// <summary>
        /// The partial download of `fileName` in `folderPath` (created when missing), its lock held until Dispose; null when
        /// another download holds it. `ownFolder`: the folder is the downloader's own, and a link in its place is removed.
        /// </summary>
        public static PartialDownload TryLock(string folderPath, bool ownFolder, string fileName)
        {
            ConfinedFolder folder = ConfinedFolder.Open(folderPath, ownFolder);
            try
            {
                IDisposable held = folder.TryLock(fileName + LockSuffix);
                if (held != null) return new PartialDownload(folder, held, fileName);
            }
            catch
            {
                folder.Dispose();
                throw;
            }
            folder.Dispose();
            return null;
        }

        /// <summary>
        /// Deletes what a stopped download of `fileName` in `folderPath` kept (bytes and record); false, and nothing deleted,
        /// while a download holds it (a cancelled one deletes its bytes itself when it stops). Nothing to do when the folder is missing.
        /// </summary>
        public static bool DiscardIfIdle(string folderPath, bool ownFolder, string fileName)
        {
            if (!Directory.Exists(folderPath)) return true;
            using (PartialDownload files = TryLock(folderPath, ownFolder, fileName))
            {
                if (files == null) return false;
                files.Discard();
                return true;
            }
        }

        /// <summary>The bytes' path (for a validator and for messages).</summary>
        public string BytesPath
        {
            get { return Path.Combine(folder.Path, bytesName); }
        }

        /// <summary>The folder the bytes are in.</summary>
        public ConfinedFolder Folder
        {
            get { return folder; }
        }

        /// <summary>How many bytes are kept (0: none).</summary>
        public long Size()
        {
            return folder.SizeOf(bytesName);
        }

        /// <summary>The record of the kept bytes; null when there is none or it is not one the runtime or this package wrote.</summary>
        public RemoteFile Remote()
        {
            byte[] data = folder.ReadSmall(recordName, MaxRecordBytes);
            return data == null ? null : RemoteFile.Parse(data);
        }

        /// <summary>True when bytes are kept and the record says which file they are (a later download can resume them).</summary>
        public bool Resumable()
        {
            return Size() > 0 && Remote() != null;
        }

        /// <summary>Start over: no bytes kept, and `remote` recorded (null: the bytes that follow will not be resumable).</summary>
        public void Begin(RemoteFile remote)
        {
            Discard();
            if (remote != null) folder.WriteAtomically(recordName, remote.ToJson());
        }

        /// <summary>The bytes' file opened for appending (created when missing).</summary>
        public Stream OpenAppend()
        {
            return folder.OpenAppend(bytesName);
        }

        /// <summary>Feeds the kept bytes to `hash`.</summary>
        public void HashInto(HashAlgorithm hash)
        {
            using (Stream stream = folder.OpenRead(bytesName))
            {
                if (stream == null) return;
                byte[] block = new byte[HashBlock];
                int read;
                while ((read = stream.Read(block, 0, block.Length)) > 0) hash.TransformBlock(block, 0, read, null, 0);
            }
        }

        /// <summary>Deletes the kept bytes and their record (a link itself, never its target).</summary>
        public void Discard()
        {
            folder.Delete(bytesName);
            folder.Delete(recordName);
        }

        /// <summary>Moves the bytes onto `destination` with one rename (replacing it); the record goes.</summary>
        public void MoveTo(string destination)
        {
            using (ConfinedFolder target = ConfinedFolder.Open(Path.GetDirectoryName(destination), false))
                folder.MoveTo(bytesName, target, Path.GetFileName(destination));
            folder.Delete(recordName);
        }

        /// <summary>Lets the lock go (deleting the lock file) and the folder.</summary>
        public void Dispose()
        {
            try
            {
                held.Dispose();
            }
            finally
            {
                folder.Dispose();
            }
        }
    }
}
