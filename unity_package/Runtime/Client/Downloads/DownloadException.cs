using System;

namespace CoreAI.Downloads
{
    /// <summary>A download failed; the message says why and what to do.</summary>
    public sealed class DownloadException : Exception
    {
        /// <summary>A failure of `kind`; resumable when the kind says so (Interrupted, Paused).</summary>
        public DownloadException(DownloadFailure kind, string message)
            : this(kind, message, kind == DownloadFailure.Interrupted || kind == DownloadFailure.Paused)
        {
        }

        /// <summary>A failure of `kind` that kept the bytes so far for the next download to resume (`resumable`) or not.</summary>
        public DownloadException(DownloadFailure kind, string message, bool resumable) : base(message)
        {
            Kind = kind;
            Resumable = resumable;
        }

        /// <summary>Why it failed.</summary>
        public DownloadFailure Kind { get; private set; }

        /// <summary>True when the partial file (and its record) were kept and downloading again resumes them.</summary>
        public bool Resumable { get; private set; }
    }
}
