using System;
using System.Security.Cryptography;
using System.Threading;

namespace CoreAI.Downloads
{
    /// <summary>What to download, where to, and what the finished file must be.</summary>
    public sealed class DownloadRequest
    {
        /// <summary>The http(s) URL.</summary>
        public string Url { get; set; }

        /// <summary>The final file; written only once the download is complete and checked.</summary>
        public string Destination { get; set; }

        /// <summary>Where the partial file collects (default: next to Destination).</summary>
        public string PartialFolder { get; set; }

        /// <summary>The expected sha256 (hex); null: not checked (the digest is still returned).</summary>
        public string Sha256 { get; set; }

        /// <summary>The expected size in bytes; -1: not known beforehand.</summary>
        public long Size { get; set; } = -1;

        /// <summary>Checks the finished file before it is moved in place (throws DownloadException NotUsable); may be null.</summary>
        public Action<string> Validate { get; set; }

        /// <summary>How long to wait for the server to answer or to send more bytes.</summary>
        public TimeSpan Timeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>The name progress reports carry (default: the destination's file name).</summary>
        public string Label { get; set; }

        /// <summary>
        /// Stops the download but keeps what arrived (DownloadFailure.Paused): for quitting or a script reload, after
        /// which the next download resumes. The download's own CancellationToken cancels it and deletes the partial file.
        /// </summary>
        public CancellationToken Pause { get; set; }
    }
}
