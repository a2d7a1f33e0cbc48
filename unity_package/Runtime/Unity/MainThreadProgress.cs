using System;
using CoreAI.Downloads;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// Download progress from a worker thread, delivered on the main thread through a <see cref="MainThreadQueue"/>:
    /// reports that arrive faster than the queue is drained are coalesced (only the newest is delivered), so a fast
    /// download never floods the queue and a handler always sees increasing numbers.
    /// </summary>
    public sealed class MainThreadProgress : IProgress<DownloadProgress>
    {
        private readonly MainThreadQueue queue;
        private readonly Action<DownloadProgress> handler;
        private readonly object gate = new object();
        private DownloadProgress pending;

        /// <summary>Runs `handler` on whichever thread drains `queue` (the main thread).</summary>
        public MainThreadProgress(MainThreadQueue queue, Action<DownloadProgress> handler)
        {
            if (queue == null) throw new ArgumentNullException(nameof(queue));
            if (handler == null) throw new ArgumentNullException(nameof(handler));
            this.queue = queue;
            this.handler = handler;
        }

        /// <summary>Called by the downloader on its thread.</summary>
        public void Report(DownloadProgress value)
        {
            bool post;
            lock (gate)
            {
                post = pending == null;
                pending = value;
            }
            if (post) queue.Post(Deliver);
        }

        private void Deliver()
        {
            DownloadProgress latest;
            lock (gate)
            {
                latest = pending;
                pending = null;
            }
            if (latest != null) handler(latest);
        }
    }
}
