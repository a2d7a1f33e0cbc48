namespace CoreAI.Downloads
{
    /// <summary>How far a download is: bytes in the file so far (resumed ones included) of Total (-1: not known yet).</summary>
    public sealed class DownloadProgress
    {
        /// <summary>A report for `item` (a model name or an archive's file name).</summary>
        public DownloadProgress(string item, long received, long total, long resumedFrom)
        {
            Item = item;
            Received = received;
            Total = total;
            ResumedFrom = resumedFrom;
        }

        /// <summary>What is downloaded: a model's name or an archive's file name.</summary>
        public string Item { get; private set; }

        /// <summary>Bytes in the file so far.</summary>
        public long Received { get; private set; }

        /// <summary>The whole file's size; -1 while it is not known.</summary>
        public long Total { get; private set; }

        /// <summary>Bytes that an earlier, interrupted download had already fetched.</summary>
        public long ResumedFrom { get; private set; }

        /// <summary>0..1, or -1 while the total is not known.</summary>
        public double Fraction
        {
            get { return Total > 0 ? System.Math.Min(1.0, (double)Received / Total) : -1; }
        }

        /// <summary>True for the last report of a finished download.</summary>
        public bool IsComplete
        {
            get { return Total >= 0 && Received >= Total; }
        }
    }
}
