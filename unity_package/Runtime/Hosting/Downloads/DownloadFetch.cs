using System;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Security.Cryptography;
using System.Threading;
using CoreAI.Launcher;

namespace CoreAI.Downloads
{
    /// <summary>
    /// Completes the partial file of one download from the server; Run returns the whole file's sha256. The same rules
    /// as the runtime's pull (pyruntime/catalog/download.py): kept bytes are continued only for the same URL, by a range
    /// request whose If-Range names the file they came from, and only when the answer is still that file (its length
    /// and validators), else the download starts over; bytes whose length the server never said are not kept. It stops
    /// once the file passes its size (the request's Size, else MaxBytes) and before the disk would keep less than
    /// KeepFreeBytes free (checked before it starts and every <see cref="DiskCheckEvery"/> bytes).
    /// </summary>
    internal sealed class DownloadFetch
    {
        /// <summary>Bytes between two looks at the free disk space.</summary>
        public const long DiskCheckEvery = 32L * 1024 * 1024;

        private const int BufferSize = 81920;
        private static readonly TimeSpan ReportEvery = TimeSpan.FromMilliseconds(100);

        private readonly DownloadRequest request;
        private readonly PartialDownload files;
        private readonly string label;
        private readonly IProgress<DownloadProgress> progress;
        private readonly CancellationToken cancellation;
        private readonly long limit;

        public DownloadFetch(DownloadRequest request, PartialDownload files, string label, IProgress<DownloadProgress> progress,
            CancellationToken cancellation)
        {
            this.request = request;
            this.files = files;
            this.label = label;
            this.progress = progress;
            this.cancellation = cancellation;
            limit = request.Size >= 0 ? request.Size : request.MaxBytes;
        }

        private string Url
        {
            get { return FileDownloader.PublicUrl(request.Url); }
        }

        /// <summary>Downloads what the partial file lacks; returns the whole file's sha256 (hex). Throws DownloadException.</summary>
        public string Run()
        {
            RemoteFile kept = Resumable();
            long offset = kept != null ? files.Size() : 0;
            if (request.Size >= 0) CheckDisk(request.Size - offset);
            using (DownloadConnection connection = new DownloadConnection(request.Url, request.Timeout, cancellation, request.Pause))
            {
                for (int attempt = 0; attempt < 2; attempt++)  // a second pass only after the server refused the range or sent another file
                {
                    if (connection.Stopped) throw Stopped();
                    HttpWebResponse response;
                    try
                    {
                        response = connection.Get(offset, kept != null ? kept.IfRange() : null, kept != null);
                    }
                    catch (WebException e)
                    {
                        if (connection.Stopped) throw Stopped();
                        throw Interrupted("the server could not be reached (" + e.Status + ")");
                    }
                    using (response)
                    {
                        int status = (int)response.StatusCode;
                        if (status == 416 && kept != null)
                        {
                            if (offset == kept.Length) return HashKept();  // nothing left to fetch: the partial file is whole
                            kept = StartOver(out offset);
                            continue;
                        }
                        CheckStatus(status);
                        RemoteFile now = Described(response, offset);
                        long start = StartOf(response);
                        if (offset > 0 && (start != offset || now == null || !kept.Continues(now)))
                        {
                            kept = StartOver(out offset);  // another file now, or another range than asked
                            if (start != 0) continue;  // a part of something else: ask again for the whole
                        }
                        if (offset == 0) files.Begin(now);
                        return Append(connection, response, offset, now != null ? now.Length : -1);
                    }
                }
            }
            throw new DownloadException(DownloadFailure.HttpError, Url + " answered no usable range twice; try again later", files.Resumable());
        }

        /// <summary>The record of the kept bytes when this download can continue them; else they are discarded.</summary>
        private RemoteFile Resumable()
        {
            RemoteFile kept = files.Remote();
            long size = files.Size();
            if (kept == null || size == 0 || kept.UrlSha256 != RemoteFile.UrlDigest(request.Url) || size > kept.Length
                || (request.Size >= 0 && kept.Length != request.Size))
            {
                files.Discard();  // bytes of another URL, or of nothing known, are never continued
                return null;
            }
            return kept;
        }

        private RemoteFile StartOver(out long offset)
        {
            files.Discard();
            offset = 0;
            return null;
        }

        private string HashKept()
        {
            using (SHA256 sha = SHA256.Create())
            {
                files.HashInto(sha);
                sha.TransformFinalBlock(new byte[0], 0, 0);
                return FileDownloader.Hex(sha.Hash);
            }
        }

        private string Append(DownloadConnection connection, HttpWebResponse response, long offset, long total)
        {
            if (total >= 0)
            {
                if (request.Size >= 0 && total != request.Size)
                    throw new DownloadException(DownloadFailure.Truncated, Url + " is " + total + " bytes, but " + request.Size
                        + " were expected: not the file this entry names; nothing was kept", false);
                if (total > limit) throw OverLimit(total);
                CheckDisk(total - offset);
            }
            using (SHA256 sha = SHA256.Create())
            {
                if (offset > 0) files.HashInto(sha);
                byte[] buffer = new byte[BufferSize];
                long received = offset;
                long nextDiskCheck = received + DiskCheckEvery;
                Report(received, total, offset);
                Stopwatch sinceReport = Stopwatch.StartNew();
                using (Stream file = files.OpenAppend())
                using (Stream body = response.GetResponseStream())
                {
                    try
                    {
                        int read;
                        while ((read = ReadBody(connection, body, buffer)) > 0)
                        {
                            if (received + read > limit) throw OverLimit(-1);
                            Write(file, buffer, read);
                            sha.TransformBlock(buffer, 0, read, null, 0);
                            received += read;
                            if (sinceReport.Elapsed >= ReportEvery)
                            {
                                sinceReport.Reset();
                                sinceReport.Start();
                                Report(received, total, offset);
                            }
                            if (received >= nextDiskCheck)
                            {
                                CheckDisk(-1);
                                nextDiskCheck = received + DiskCheckEvery;
                            }
                            if (connection.Stopped) throw Stopped();
                        }
                    }
                    finally
                    {
                        Sync(file);  // whatever happened: the bytes so far may be resumed
                    }
                }
                if (connection.Stopped) throw Stopped();  // an aborted body can read as its end
                if (total >= 0 && received < total) throw Interrupted("the server closed the connection early");
                Report(received, total >= 0 ? total : received, offset);
                sha.TransformFinalBlock(buffer, 0, 0);
                return FileDownloader.Hex(sha.Hash);
            }
        }

        private int ReadBody(DownloadConnection connection, Stream body, byte[] buffer)
        {
            try
            {
                return body.Read(buffer, 0, buffer.Length);
            }
            catch (Exception e) when (e is IOException || e is WebException || e is ObjectDisposedException)
            {
                if (connection.Stopped) throw Stopped();
                WebException web = e as WebException;
                throw Interrupted(web != null ? "the server stopped sending (" + web.Status + ")" : "the connection failed (" + e.GetType().Name + ")");
            }
        }

        private void Write(Stream file, byte[] buffer, int count)
        {
            try
            {
                file.Write(buffer, 0, count);
            }
            catch (IOException e) when (DiskFullException.Is(e))
            {
                throw NoRoom("the disk is full");
            }
        }

        private static void Sync(Stream file)
        {
            try
            {
                FileStream stream = file as FileStream;
                if (stream != null) stream.Flush(true);
                else file.Flush();
            }
            catch (IOException)
            {
                // The bytes are written; only their durability is unknown (a full disk): the error that stopped us says more.
            }
        }

        private void Report(long received, long total, long offset)
        {
            if (progress != null) progress.Report(new DownloadProgress(label, received, total, offset));
        }

        // -- limits -------------------------------------------------------------------------------

        /// <summary>DownloadException when `more` bytes (-1: nothing more known) would leave less than KeepFreeBytes free.</summary>
        private void CheckDisk(long more)
        {
            long free = files.Folder.FreeBytes();
            if (free < 0) return;  // the OS does not say: not checked
            if ((decimal)free >= Math.Max(0, more) + (decimal)request.KeepFreeBytes) return;
            string wanted = more > 0 ? FileDownloader.SizeText(more) + " more to download and " : "";
            throw NoRoom("not enough disk space: " + wanted + FileDownloader.SizeText(request.KeepFreeBytes) + " to keep free (KeepFreeBytes), but "
                + FileDownloader.SizeText(free) + " free");
        }

        private DownloadException NoRoom(string why)
        {
            bool resumable = files.Resumable();
            string kept = resumable ? "the " + FileDownloader.SizeText(files.Size()) + " downloaded so far are kept: free some space and download again to resume"
                : "nothing was kept";
            return new DownloadException(DownloadFailure.NoDiskSpace, "the download of " + Url + " stopped: " + why + "; " + kept, resumable);
        }

        private DownloadException OverLimit(long total)
        {
            if (request.Size >= 0)
                return new DownloadException(DownloadFailure.TooLarge, Url + " sent more than the " + request.Size + " bytes expected: not the file "
                    + "this entry names; nothing was kept", false);
            string said = total >= 0 ? "is " + FileDownloader.SizeText(total) : "sent more than " + FileDownloader.SizeText(limit);
            return new DownloadException(DownloadFailure.TooLarge, Url + " " + said + ", over the " + FileDownloader.SizeText(request.MaxBytes)
                + " limit of a download (MaxBytes); nothing was kept (raise MaxBytes if the file really is that large)", false);
        }

        // -- HTTP -----------------------------------------------------------------------------------

        private void CheckStatus(int status)
        {
            if (status < 300) return;
            if (status == 404)
            {
                files.Discard();
                throw new DownloadException(DownloadFailure.NotFound, Url + " was not found (HTTP 404): check the name or URL", false);
            }
            if (status == 401 || status == 403)
                throw new DownloadException(DownloadFailure.Refused, Url + " refused the download (HTTP " + status + "): the file may need a login "
                    + "or licence acceptance on its site; download it there and set the model file yourself", files.Resumable());
            string why = status < 400 ? "answered HTTP " + status + " without a usable redirect" : "answered HTTP " + status;
            throw new DownloadException(DownloadFailure.HttpError, Url + " " + why + "; try again later", files.Resumable());
        }

        /// <summary>What the answer says of the whole file; null when it gives no length (such bytes are not resumable).</summary>
        private RemoteFile Described(HttpWebResponse response, long offset)
        {
            long total = TotalOf(response, offset);
            return total < 0 ? null : RemoteFile.Describe(request.Url, total, response.Headers["ETag"], response.Headers["Last-Modified"]);
        }

        /// <summary>The first byte the response carries: 0 for a 200, the Content-Range start for a 206 (-1: unreadable).</summary>
        private static long StartOf(HttpWebResponse response)
        {
            if ((int)response.StatusCode != 206) return 0;
            string[] parts = (response.Headers["Content-Range"] ?? "").Split(' ');
            long start;
            if (parts.Length == 2 && long.TryParse(parts[1].Split('-')[0], out start)) return start;
            return -1;
        }

        /// <summary>The whole file's size as the server states it (Content-Range total, or offset + Content-Length); -1 when unknown.</summary>
        private static long TotalOf(HttpWebResponse response, long offset)
        {
            bool partial = (int)response.StatusCode == 206;
            if (partial)
            {
                string range = response.Headers["Content-Range"] ?? "";
                long total;
                if (long.TryParse(range.Substring(range.LastIndexOf('/') + 1), out total)) return total;
            }
            if (response.ContentLength < 0 || !string.IsNullOrEmpty(response.Headers["Content-Encoding"])) return -1;
            return partial ? offset + response.ContentLength : response.ContentLength;
        }

        private DownloadException Interrupted(string why)
        {
            long have = files.Size();
            if (files.Resumable())
                return new DownloadException(DownloadFailure.Interrupted, "the download of " + Url + " was interrupted: " + why + " after " + have
                    + " bytes; download again to resume where it stopped", true);
            string kept = have > 0 ? "; the server gave no length for the file, so nothing was kept: download again to start over"
                : "; download again to start over";
            return new DownloadException(DownloadFailure.Interrupted, "the download of " + Url + " was interrupted: " + why + kept, false);
        }

        /// <summary>Cancelled (the caller's token: nothing is kept) or paused (Pause: resumable bytes stay for the next download).</summary>
        private DownloadException Stopped()
        {
            if (!cancellation.IsCancellationRequested && request.Pause.IsCancellationRequested)
            {
                bool resumable = files.Resumable();
                return new DownloadException(DownloadFailure.Paused, "the download of " + label + " was paused; it "
                    + (resumable ? "resumes where it stopped" : "starts over") + " next time", resumable);
            }
            return new DownloadException(DownloadFailure.Cancelled, "the download of " + label + " was cancelled; nothing of it was kept", false);
        }
    }
}
