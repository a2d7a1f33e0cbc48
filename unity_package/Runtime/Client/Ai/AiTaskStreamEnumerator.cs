using System;
using System.Collections.Concurrent;
using System.Threading;
using System.Threading.Tasks;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>The enumerator of an <see cref="AiTaskStream"/>: MoveNextAsync / Current / DisposeAsync.</summary>
    public sealed class AiTaskStreamEnumerator
    {
        private readonly ConcurrentQueue<AiTaskStreamItem> _items = new ConcurrentQueue<AiTaskStreamItem>();
        private readonly SemaphoreSlim _available = new SemaphoreSlim(0);
        private readonly CancellationTokenSource _cancel;
        private Task<AiTaskResult> _finished;

        internal AiTaskStreamEnumerator(CancellationTokenSource cancel)
        {
            _cancel = cancel;
        }

        /// <summary>The item MoveNextAsync moved to.</summary>
        public AiTaskStreamItem Current { get; private set; }

        /// <summary>True with the next item in Current; false once the turn ended; the turn's failure is thrown here.</summary>
        public async Task<bool> MoveNextAsync()
        {
            await _available.WaitAsync().ConfigureAwait(false);
            AiTaskStreamItem item;
            if (_items.TryDequeue(out item))
            {
                Current = item;
                return true;
            }
            _available.Release();  // the end marker stays, so a further call answers false again
            Current = null;
            await Volatile.Read(ref _finished).ConfigureAwait(false);  // rethrows the turn's failure
            return false;
        }

        /// <summary>Stop the turn if it still runs (a `break` out of the loop) and wait until it ended.</summary>
        public async Task DisposeAsync()
        {
            if (Volatile.Read(ref _finished) == null)
            {
                _cancel.Cancel();
            }
            while (Volatile.Read(ref _finished) == null)
            {
                await _available.WaitAsync().ConfigureAwait(false);
                AiTaskStreamItem dropped;
                if (!_items.TryDequeue(out dropped)) _available.Release();
            }
            try
            {
                await _finished.ConfigureAwait(false);
            }
            catch (Exception)
            {
                // Disposal after a break or a failure: the failure was (or is) reported by MoveNextAsync / Result.
            }
            _cancel.Dispose();
        }

        internal void Add(AiTaskStreamItem item)
        {
            _items.Enqueue(item);
            _available.Release();
        }

        internal void Finish(Task<AiTaskResult> finished)
        {
            Volatile.Write(ref _finished, finished);
            _available.Release();  // the end marker: a release with no item
        }
    }
}
