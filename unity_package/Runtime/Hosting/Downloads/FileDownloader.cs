using System;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Downloads
{
    /// <summary>
    /// One resumable, verified download into a file, the same rules as the runtime's `coreai-runtime models pull`:
    /// the bytes go to `&lt;name&gt;.partial` first; an interrupted or paused download keeps it and the next call asks for
    /// the rest (an HTTP range); a server that ignores ranges sends the whole file again. Only a complete file whose size
    /// and sha256 match (and that Validate accepts) replaces Destination, so Destination is never half-written. A
    /// cancelled download, a wrong checksum, a truncated body or a file that fails validation deletes the partial file.
    /// The `.lock` file that keeps two downloads of one file apart is deleted when the download ends, however it ends
    /// (FileOptions.DeleteOnClose). Progress is reported from the downloading thread, at most every 100 ms (wrap it to
    /// reach Unity's main thread).
    /// </summary>
    public static class FileDownloader
    {
        private const int BufferSize = 81920;
        private static readonly TimeSpan ReportEvery = TimeSpan.FromMilliseconds(100);

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
            string destination = Path.GetFullPath(request.Destination);
            string folder = string.IsNullOrEmpty(request.PartialFolder) ? Path.GetDirectoryName(destination) : request.PartialFolder;
            Directory.CreateDirectory(folder);
            Directory.CreateDirectory(Path.GetDirectoryName(destination));
            string partial = Path.Combine(folder, Path.GetFileName(destination) + ".partial");
            string label = string.IsNullOrEmpty(request.Label) ? Path.GetFileName(destination) : request.Label;
            using (FileStream held = Lock(partial + ".lock", label))
            {
                try
                {
                    string digest = Fetch(request, partial, label, progress, cancellation);
                    Verify(request, partial, digest);
                    MoveIntoPlace(partial, destination);
                    return digest;
                }
                catch (DownloadException e) when (e.Kind == DownloadFailure.Cancelled)
                {
                    DeletePartial(partial);
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

        private static FileStream Lock(string path, string label)
        {
            try
            {
                return new FileStream(path, FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.None, 1, FileOptions.DeleteOnClose);
            }
            catch (IOException)
            {
                throw new DownloadException(DownloadFailure.Busy, "another download of " + label + " is running (wait for it, or stop it)");
            }
        }

        private static string Fetch(DownloadRequest request, string partial, string label, IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            long offset = File.Exists(partial) ? new FileInfo(partial).Length : 0;
            if (request.Size >= 0 && offset > request.Size) offset = Restart(partial);
            for (int attempt = 0; attempt < 2; attempt++) // a second pass only after the server refused or ignored the range
            {
                if (cancellation.IsCancellationRequested || request.Pause.IsCancellationRequested) throw Stopped(request, label, cancellation);
                HttpWebRequest web = (HttpWebRequest)WebRequest.Create(request.Url);
                web.Method = "GET";
                web.AllowAutoRedirect = true;
                web.KeepAlive = false; // one long transfer: nothing to reuse, and a broken one must not be reused
                web.Timeout = (int)request.Timeout.TotalMilliseconds;
                web.ReadWriteTimeout = (int)request.Timeout.TotalMilliseconds;
                if (offset > 0) web.AddRange(offset);
                HttpWebResponse response;
                using (cancellation.Register(web.Abort))
                using (request.Pause.Register(web.Abort))
                {
                    try
                    {
                        response = (HttpWebResponse)web.GetResponse();
                    }
                    catch (WebException e)
                    {
                        if (cancellation.IsCancellationRequested || request.Pause.IsCancellationRequested) throw Stopped(request, label, cancellation);
                        HttpWebResponse failed = e.Response as HttpWebResponse;
                        if (failed == null) throw Interrupted(partial, request.Url, "the server could not be reached (" + e.Status + ")");
                        int status = (int)failed.StatusCode;
                        failed.Close();
                        if (status == 416 && offset > 0)
                        {
                            if (request.Size < 0 || offset == request.Size) return Sha256OfFile(partial); // the partial file is whole
                            offset = Restart(partial);
                            continue;
                        }
                        throw StatusError(status, request.Url, partial);
                    }
                    using (response)
                    {
                        long start = StartOf(response);
                        if (start != offset)
                        {
                            offset = Restart(partial); // a 200 to a range request: the server sends everything again
                            if (start != 0) continue;
                        }
                        long total = TotalOf(response, offset);
                        if (request.Size >= 0 && total >= 0 && total != request.Size)
                        {
                            File.Delete(partial);
                            throw new DownloadException(DownloadFailure.Truncated, PublicUrl(request.Url) + " is " + total + " bytes, but " + request.Size
                                + " were expected: not the file this entry names; nothing was kept");
                        }
                        return Append(response, partial, offset, request.Size >= 0 ? request.Size : total, label, request, progress, cancellation);
                    }
                }
            }
            throw new DownloadException(DownloadFailure.HttpError, PublicUrl(request.Url) + " answered no usable range twice; try again later");
        }

        private static string Append(HttpWebResponse response, string partial, long offset, long total, string label, DownloadRequest request,
            IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            string url = request.Url;
            using (SHA256 sha = SHA256.Create())
            {
                byte[] buffer = new byte[BufferSize];
                if (offset > 0)
                {
                    using (FileStream existing = File.OpenRead(partial))
                    {
                        int n;
                        while ((n = existing.Read(buffer, 0, buffer.Length)) > 0) sha.TransformBlock(buffer, 0, n, null, 0);
                    }
                }
                long received = offset;
                Report(progress, label, received, total, offset);
                Stopwatch sinceReport = Stopwatch.StartNew();
                using (FileStream file = new FileStream(partial, FileMode.Append, FileAccess.Write, FileShare.None))
                using (Stream body = response.GetResponseStream())
                {
                    try
                    {
                        int read;
                        while ((read = body.Read(buffer, 0, buffer.Length)) > 0)
                        {
                            file.Write(buffer, 0, read);
                            sha.TransformBlock(buffer, 0, read, null, 0);
                            received += read;
                            if (sinceReport.Elapsed >= ReportEvery)
                            {
                                sinceReport.Reset();
                                sinceReport.Start();
                                Report(progress, label, received, total, offset);
                            }
                            if (cancellation.IsCancellationRequested || request.Pause.IsCancellationRequested)
                            {
                                file.Flush(true);
                                throw Stopped(request, label, cancellation);
                            }
                        }
                    }
                    catch (IOException e)
                    {
                        file.Flush(true);
                        if (cancellation.IsCancellationRequested || request.Pause.IsCancellationRequested) throw Stopped(request, label, cancellation);
                        throw Interrupted(partial, url, "the connection failed (" + e.GetType().Name + ")");
                    }
                    catch (WebException e)
                    {
                        file.Flush(true);
                        if (cancellation.IsCancellationRequested || request.Pause.IsCancellationRequested) throw Stopped(request, label, cancellation);
                        throw Interrupted(partial, url, "the server stopped sending (" + e.Status + ")");
                    }
                    file.Flush(true);
                }
                if (total >= 0 && received < total) throw Interrupted(partial, url, "the server closed the connection early");
                Report(progress, label, received, total >= 0 ? total : received, offset);
                sha.TransformFinalBlock(buffer, 0, 0);
                return Hex(sha.Hash);
            }
        }

        private static void Verify(DownloadRequest request, string partial, string digest)
        {
            long actual = new FileInfo(partial).Length;
            if (request.Size >= 0 && actual != request.Size)
            {
                File.Delete(partial);
                throw new DownloadException(DownloadFailure.Truncated, "the download of " + PublicUrl(request.Url) + " is truncated or padded: "
                    + actual + " bytes where " + request.Size + " were expected; it was deleted, download it again");
            }
            if (!string.IsNullOrEmpty(request.Sha256) && !string.Equals(digest, request.Sha256.Trim(), StringComparison.OrdinalIgnoreCase))
            {
                File.Delete(partial);
                throw new DownloadException(DownloadFailure.ChecksumMismatch, "checksum mismatch for " + PublicUrl(request.Url) + ": expected sha256 "
                    + request.Sha256.Trim().ToLowerInvariant() + ", got " + digest + "; the file was deleted (the server sent another or a corrupt file)");
            }
            if (request.Validate == null) return;
            try
            {
                request.Validate(partial);
            }
            catch (DownloadException e)
            {
                File.Delete(partial);
                throw new DownloadException(DownloadFailure.NotUsable, PublicUrl(request.Url) + " is not usable: " + e.Message + "; the file was deleted");
            }
        }

        private static void MoveIntoPlace(string partial, string destination)
        {
            // File.Replace swaps in one step where the destination exists; File.Move is a rename on the same volume.
            if (File.Exists(destination)) File.Replace(partial, destination, null);
            else File.Move(partial, destination);
        }

        private static long StartOf(HttpWebResponse response)
        {
            if ((int)response.StatusCode != 206) return 0;
            string range = response.Headers["Content-Range"] ?? "";
            string[] parts = range.Split(' ');
            long start;
            if (parts.Length == 2 && long.TryParse(parts[1].Split('-')[0], out start)) return start;
            return -1; // unreadable: treated as a range we did not ask for
        }

        private static long TotalOf(HttpWebResponse response, long offset)
        {
            if ((int)response.StatusCode == 206)
            {
                string range = response.Headers["Content-Range"] ?? "";
                long total;
                int slash = range.LastIndexOf('/');
                if (slash >= 0 && long.TryParse(range.Substring(slash + 1), out total)) return total;
            }
            return response.ContentLength >= 0 ? offset + response.ContentLength : -1;
        }

        private static long Restart(string partial)
        {
            if (File.Exists(partial)) File.Delete(partial);
            return 0;
        }

        private static DownloadException StatusError(int status, string url, string partial)
        {
            if (status == 404)
            {
                if (File.Exists(partial)) File.Delete(partial);
                return new DownloadException(DownloadFailure.NotFound, PublicUrl(url) + " was not found (HTTP 404): check the name or URL");
            }
            if (status == 401 || status == 403)
                return new DownloadException(DownloadFailure.Refused, PublicUrl(url) + " refused the download (HTTP " + status + "): the file may need a login "
                    + "or licence acceptance on its site; download it there and set the model file yourself");
            return new DownloadException(DownloadFailure.HttpError, PublicUrl(url) + " answered HTTP " + status + "; try again later");
        }

        private static DownloadException Interrupted(string partial, string url, string why)
        {
            long have = File.Exists(partial) ? new FileInfo(partial).Length : 0;
            return new DownloadException(DownloadFailure.Interrupted, "the download of " + PublicUrl(url) + " was interrupted: " + why + " after " + have
                + " bytes; download again to resume where it stopped");
        }

        /// <summary>Cancelled (the caller's token: the partial file goes) or paused (Pause: it stays for the next download).</summary>
        private static DownloadException Stopped(DownloadRequest request, string label, CancellationToken cancellation)
        {
            if (!cancellation.IsCancellationRequested && request.Pause.IsCancellationRequested)
                return new DownloadException(DownloadFailure.Paused, "the download of " + label + " was paused; it resumes where it stopped next time");
            return new DownloadException(DownloadFailure.Cancelled, "the download of " + label + " was cancelled; nothing of it was kept");
        }

        private static void DeletePartial(string partial)
        {
            try
            {
                if (File.Exists(partial)) File.Delete(partial);
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                // Still held (Windows): the next download overwrites or resumes it.
            }
        }

        private static void Report(IProgress<DownloadProgress> progress, string label, long received, long total, long offset)
        {
            if (progress != null) progress.Report(new DownloadProgress(label, received, total, offset));
        }

        private static string Hex(byte[] bytes)
        {
            StringBuilder hex = new StringBuilder(bytes.Length * 2);
            foreach (byte b in bytes) hex.Append(b.ToString("x2"));
            return hex.ToString();
        }
    }
}
