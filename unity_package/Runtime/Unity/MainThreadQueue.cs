using System;
using System.Collections.Generic;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// Actions posted from any thread, run on the main thread when <see cref="Drain"/> is called
    /// (the bootstrap drains it every Update). Unity's API may only be touched from the main thread.
    /// </summary>
    public sealed class MainThreadQueue
    {
        private readonly Queue<Action> pending = new Queue<Action>();

        /// <summary>Number of actions waiting.</summary>
        public int Count
        {
            get { lock (pending) return pending.Count; }
        }

        /// <summary>Queues `action` (thread-safe).</summary>
        public void Post(Action action)
        {
            if (action == null) throw new ArgumentNullException(nameof(action));
            lock (pending) pending.Enqueue(action);
        }

        /// <summary>
        /// Runs up to `max` queued actions in order on the calling thread; returns how many ran. An
        /// action that throws is reported to `onError` and does not stop the others.
        /// </summary>
        public int Drain(int max = int.MaxValue, Action<Exception> onError = null)
        {
            int ran = 0;
            while (ran < max)
            {
                Action next;
                lock (pending)
                {
                    if (pending.Count == 0) break;
                    next = pending.Dequeue();
                }
                ran++;
                try
                {
                    next();
                }
                catch (Exception e)
                {
                    if (onError != null) onError(e);
                }
            }
            return ran;
        }
    }
}
