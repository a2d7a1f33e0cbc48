using System;
using System.Collections.Generic;
using System.Net;
using System.Threading;

namespace CoreAI.Downloads
{
    /// <summary>
    /// The GET requests of one download (HttpWebRequest, HTTP/1.1), with redirects followed by hand: at most
    /// <see cref="MaxRedirects"/>, to http and https only, never from https down to http, never back to a URL already
    /// visited, and a redirect's body is never read. The request in flight (its body included) is aborted when the
    /// download is cancelled or paused. A connection that fails throws WebException; a refused redirect, a
    /// DownloadException of kind BadRedirect that says why.
    /// </summary>
    internal sealed class DownloadConnection : IDisposable
    {
        /// <summary>The most redirects one request follows.</summary>
        public const int MaxRedirects = 10;

        private readonly string url;
        private readonly TimeSpan timeout;
        private readonly CancellationToken cancellation;
        private readonly CancellationToken pause;
        private readonly CancellationTokenRegistration onCancel;
        private readonly CancellationTokenRegistration onPause;
        private HttpWebRequest current;

        public DownloadConnection(string url, TimeSpan timeout, CancellationToken cancellation, CancellationToken pause)
        {
            this.url = url;
            this.timeout = timeout;
            this.cancellation = cancellation;
            this.pause = pause;
            onCancel = cancellation.Register(Abort);
            onPause = pause.Register(Abort);
        }

        /// <summary>True once the download was cancelled or paused.</summary>
        public bool Stopped
        {
            get { return cancellation.IsCancellationRequested || pause.IsCancellationRequested; }
        }

        /// <summary>
        /// The answer to GET url after its redirects, whatever its status (an HTTP error's response is returned, not
        /// thrown). `from` &gt; 0 asks for the bytes from there on (Range), `ifRange` only while the file is still the one
        /// it names. `kept`: the bytes so far are kept for a resume (said by a refused redirect's error).
        /// </summary>
        public HttpWebResponse Get(long from, string ifRange, bool kept)
        {
            Uri target = new Uri(url);
            HashSet<string> seen = new HashSet<string> { target.AbsoluteUri };
            for (int hop = 0; hop <= MaxRedirects; hop++)
            {
                HttpWebResponse response = Send(target, from, ifRange);
                int status = (int)response.StatusCode;
                if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308) return response;
                string location = response.Headers["Location"];
                response.Close();  // the connection is not kept alive: closing it reads nothing more of the body
                target = Next(target, location, kept);
                if (!seen.Add(target.AbsoluteUri))
                    throw Refused(FileDownloader.PublicUrl(url) + " redirects in a loop (back to " + FileDownloader.PublicUrl(target.AbsoluteUri)
                        + "); check the URL", kept);
            }
            throw Refused(FileDownloader.PublicUrl(url) + " redirected more than " + MaxRedirects + " times; check the URL", kept);
        }

        public void Dispose()
        {
            onCancel.Dispose();
            onPause.Dispose();
        }

        private HttpWebResponse Send(Uri target, long from, string ifRange)
        {
            HttpWebRequest web = (HttpWebRequest)WebRequest.Create(target);
            web.Method = "GET";
            web.AllowAutoRedirect = false;
            web.KeepAlive = false;  // one long transfer: nothing to reuse, and a broken one must not be reused
            web.Timeout = (int)timeout.TotalMilliseconds;
            web.ReadWriteTimeout = (int)timeout.TotalMilliseconds;
            if (from > 0)
            {
                web.AddRange(from);
                if (ifRange != null) web.Headers["If-Range"] = ifRange;  // a changed file comes back whole (200), not spliced
            }
            Volatile.Write(ref current, web);
            if (Stopped) web.Abort();
            try
            {
                return (HttpWebResponse)web.GetResponse();
            }
            catch (WebException e) when (e.Response is HttpWebResponse && !Stopped)
            {
                return (HttpWebResponse)e.Response;
            }
        }

        private Uri Next(Uri from, string location, bool kept)
        {
            Uri target;
            if (string.IsNullOrEmpty(location) || !Uri.TryCreate(from, location, out target))
                throw Refused(FileDownloader.PublicUrl(url) + " answered with a redirect to an invalid URL", kept);
            if (target.Scheme != Uri.UriSchemeHttp && target.Scheme != Uri.UriSchemeHttps)
                throw Refused(FileDownloader.PublicUrl(url) + " redirected to a " + target.Scheme + ": URL; only http and https downloads are "
                    + "followed (nothing was downloaded from it)", kept);
            if (from.Scheme == Uri.UriSchemeHttps && target.Scheme == Uri.UriSchemeHttp)
                throw Refused(FileDownloader.PublicUrl(url) + " redirected from https to plain http (" + FileDownloader.PublicUrl(target.AbsoluteUri)
                    + "); refused, since the file could be changed on the way", kept);
            return target;
        }

        private static DownloadException Refused(string message, bool kept)
        {
            return new DownloadException(DownloadFailure.BadRedirect, message, kept);
        }

        private void Abort()
        {
            HttpWebRequest web = Volatile.Read(ref current);
            if (web != null) web.Abort();
        }
    }
}
