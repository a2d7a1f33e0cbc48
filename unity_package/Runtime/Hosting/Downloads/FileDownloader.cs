using System;
using System.Globalization;
using System.IO;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Downloads
{
    /// <summary>
    /// One resumable, bounded, verified download into a file, the same rules as the runtime's `coreai-runtime models pull`
    /// (docs/models.md): the bytes collect in `&lt;name&gt;.partial` with a record of which file they are
    /// (`&lt;name&gt;.partial.json`), and the next download continues them only from the same URL and while the server still
    /// has that same file (If-Range); otherwise it starts over. Bytes of a server that never said the file's length are not
    /// kept. A download stops once it passes its size (the request's Size exactly, else MaxBytes) and before the disk would
    /// keep less than KeepFreeBytes free. Redirects are followed by hand (at most 10; loops, non-http targets and https to
    /// http refused). Nothing in the partial folder is reached through a link (a planted link, FIFO or file is removed,
    /// what a link points to is never touched). Only a complete file whose size and sha256 match (and that Validate
    /// accepts) replaces Destination, with one rename, so Destination is never half-written. A cancelled download, or one
    /// that failed for good, leaves no partial file and no record; the `.lock` file that keeps two downloads of one file
    /// apart (the runtime's among them) is deleted when the download ends, however it ends. Progress is reported from the
    /// downloading thread, at most every 100 ms (wrap it to reach Unity's main thread).
    /// </summary>
    public static class FileDownloader
    {
        /// <summary>Download on a pool thread; the task's result is the file's sha256 (hex).</summary>
        public static Task<string> DownloadAsync(DownloadRequest request, IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            return Task.Run(() => Download(request, progress, cancellation), cancellation);
        }

        /// <summary>Download on the calling thread (blocks); returns the file's sha256 (hex). Throws DownloadException.</summary>
        public static string Download(DownloadRequest request, IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            if (string.IsNullOrEmpty(request.Url) || !(request.Url.StartsWith("http://", StringComparison.OrdinalIgnoreCase)
                || request.Url.StartsWith("https://", StringComparison.OrdinalIgnoreCase)))
                throw new ArgumentException("the download URL must be http:// or https://");
            if (string.IsNullOrEmpty(request.Destination)) throw new ArgumentException("the download has no destination");
            if (request.MaxBytes <= 0 || request.KeepFreeBytes < 0) throw new ArgumentException("MaxBytes must be positive and KeepFreeBytes not negative");
            string destination = Path.GetFullPath(request.Destination);
            bool ownFolder = !string.IsNullOrEmpty(request.PartialFolder);
            string folder = ownFolder ? Path.GetFullPath(request.PartialFolder) : Path.GetDirectoryName(destination);
            Directory.CreateDirectory(Path.GetDirectoryName(destination));
            string label = string.IsNullOrEmpty(request.Label) ? Path.GetFileName(destination) : request.Label;
            PartialDownload files = PartialDownload.TryLock(folder, ownFolder, Path.GetFileName(destination));
            if (files == null) throw new DownloadException(DownloadFailure.Busy, "another download of " + label + " is running (wait for it, or stop it)");
            using (files)
            {
                try
                {
                    string digest = new DownloadFetch(request, files, label, progress, cancellation).Run();
                    Verify(request, files, digest);
                    files.MoveTo(destination);
                    return digest;
                }
                catch (Exception e)
                {
                    DiscardUnlessResumable(files, e as DownloadException);
                    throw;
                }
            }
        }

        /// <summary>`url` without its query and credentials, for messages (signed URLs carry tokens there).</summary>
        public static string PublicUrl(string url)
        {
            Uri uri;
            if (!Uri.TryCreate(url, UriKind.Absolute, out uri)) return "(invalid URL)";
            return uri.Scheme + "://" + uri.Authority + uri.AbsolutePath;
        }

        /// <summary>Lowercase hex SHA-256 of a file.</summary>
        public static string Sha256OfFile(string path)
        {
            using (SHA256 sha = SHA256.Create())
            using (FileStream stream = File.OpenRead(path))
            {
                return Hex(sha.ComputeHash(stream));
            }
        }

        /// <summary>A byte count for people: `1.5 GB`, `12.0 MB`.</summary>
        internal static string SizeText(long bytes)
        {
            return bytes >= 1000000000L ? (bytes / 1e9).ToString("#,0.0", CultureInfo.InvariantCulture) + " GB"
                : (bytes / 1e6).ToString("#,0.0", CultureInfo.InvariantCulture) + " MB";
        }

        internal static string Hex(byte[] bytes)
        {
            StringBuilder hex = new StringBuilder(bytes.Length * 2);
            foreach (byte b in bytes) hex.Append(b.ToString("x2"));
            return hex.ToString();
        }

        private static void Verify(DownloadRequest request, PartialDownload files, string digest)
        {
            long actual = files.Size();
            if (request.Size >= 0 && actual != request.Size)
                throw new DownloadException(DownloadFailure.Truncated, "the download of " + PublicUrl(request.Url) + " is truncated or padded: "
                    + actual + " bytes where " + request.Size + " were expected; it was deleted, download it again");
            if (!string.IsNullOrEmpty(request.Sha256) && !string.Equals(digest, request.Sha256.Trim(), StringComparison.OrdinalIgnoreCase))
                throw new DownloadException(DownloadFailure.ChecksumMismatch, "checksum mismatch for " + PublicUrl(request.Url) + ": expected sha256 "
                    + request.Sha256.Trim().ToLowerInvariant() + ", got " + digest + "; the file was deleted (the server sent another or a corrupt file)");
            if (request.Validate == null) return;
            try
            {
                request.Validate(files.BytesPath);
            }
            catch (DownloadException e)
            {
                throw new DownloadException(DownloadFailure.NotUsable, PublicUrl(request.Url) + " is not usable: " + e.Message + "; the file was deleted");
            }
        }

        /// <summary>Keeps the bytes only when the error says so (or is unexpected) and a later download can resume them.</summary>
        private static void DiscardUnlessResumable(PartialDownload files, DownloadException failure)
        {
            try
            {
                if ((failure != null && !failure.Resumable) || !files.Resumable()) files.Discard();
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                // Still held (Windows), or a folder is in the way: the next download starts over or says so.
            }
        }
    }
}
