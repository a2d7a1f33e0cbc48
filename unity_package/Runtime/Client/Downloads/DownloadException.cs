using System;

namespace CoreAI.Downloads
{
    /// <summary>A download failed; the message says why and what to do.</summary>
    public sealed class DownloadException : Exception
    {
        /// <summary>A failure of `kind`.</summary>
        public DownloadException(DownloadFailure kind, string message) : base(message)
        {
            Kind = kind;
        }

        /// <summary>Why it failed.</summary>
        public DownloadFailure Kind { get; private set; }

        /// <summary>True when the partial file was kept and downloading again resumes it.</summary>
        public bool Resumable
        {
            get { return Kind == DownloadFailure.Interrupted || Kind == DownloadFailure.Paused; }
        }
    }
}
