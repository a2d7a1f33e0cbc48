using System;

namespace CoreAI.Downloads
{
    /// <summary>Why a download failed.</summary>
    public enum DownloadFailure
    {
        /// <summary>The server has no such file (HTTP 404).</summary>
        NotFound,

        /// <summary>The server refused it (HTTP 401/403: a login or licence acceptance).</summary>
        Refused,

        /// <summary>Another HTTP error.</summary>
        HttpError,

        /// <summary>The connection broke or stalled; the partial file was kept and the next call resumes it.</summary>
        Interrupted,

        /// <summary>The finished file has the wrong size; it was deleted.</summary>
        Truncated,

        /// <summary>The finished file's sha256 is not the expected one; it was deleted.</summary>
        ChecksumMismatch,

        /// <summary>The file is not what it should be (not a GGUF model, an archive without the runtime); it was deleted.</summary>
        NotUsable,

        /// <summary>Another download of the same file is running.</summary>
        Busy,

        /// <summary>Cancelled: nothing of it was kept (no partial file, no lock file).</summary>
        Cancelled,

        /// <summary>Stopped for now (quitting, a script reload): the partial file was kept and the next download resumes it.</summary>
        Paused,
    }
}
