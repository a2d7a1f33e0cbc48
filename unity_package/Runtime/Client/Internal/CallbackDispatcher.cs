using System;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Ai
{
    /// <summary>
    /// Runs a stream's callbacks on a SynchronizationContext (Unity's main thread) in order, or inline when there
    /// is none; the first callback that throws cancels the stream and its exception is what the caller sees. Once the
    /// caller or the client's lifetime is cancelled, callbacks still queued on the context are dropped, not run.
    /// </summary>
    internal sealed class CallbackDispatcher : IDisposable
    {
        private readonly SynchronizationContext _context;
        private readonly CancellationToken _caller;
        private readonly CancellationToken _lifetime;
        private readonly CancellationTokenSource _cts;
        private readonly TaskCompletionSource<bool> _drained = new TaskCompletionSource<bool>();
        private readonly object _lock = new object();
        private int _pending;
        private bool _closed;
        private ExceptionDispatchInfo _error;

        /// <summary>Callbacks go to context (null: run inline on the reading thread).</summary>
        public CallbackDispatcher(SynchronizationContext context, CancellationToken caller)
            : this(context, caller, CancellationToken.None)
        {
        }

        /// <summary>Callbacks go to context (null: inline); `lifetime` (the client's) ends the stream as `caller` does.</summary>
        public CallbackDispatcher(SynchronizationContext context, CancellationToken caller, CancellationToken lifetime)
        {
            _context = context;
            _caller = caller;
            _lifetime = lifetime;
            _cts = CancellationTokenSource.CreateLinkedTokenSource(caller, lifetime);
        }

        /// <summary>The caller's token and the lifetime, also cancelled when a callback failed.</summary>
        public CancellationToken Token => _cts.Token;

        /// <summary>True once a callback threw.</summary>
        public bool Failed
        {
            get { lock (_lock) return _error != null; }
        }

        /// <summary>Run action on the context (in posting order), or now when there is none.</summary>
        public void Run(Action action)
        {
            if (_context == null)
            {
                action();  // inline: an exception ends the read loop unchanged, as before
                return;
            }
            lock (_lock)
            {
                _pending++;
            }
            _context.Post(_ => Invoke(action), null);
        }

        /// <summary>Completes once every posted callback ran (no more are posted after this call).</summary>
        public Task DrainAsync()
        {
            lock (_lock)
            {
                _closed = true;
                if (_pending == 0) _drained.TrySetResult(true);
            }
            return _drained.Task;
        }

        /// <summary>Rethrow the first callback's exception with its stack.</summary>
        public void ThrowIfFailed()
        {
            ExceptionDispatchInfo error;
            lock (_lock) error = _error;
            if (error != null) error.Throw();
        }

        /// <summary>Releases the linked token source.</summary>
        public void Dispose()
        {
            _cts.Dispose();
        }

        private void Invoke(Action action)
        {
            try
            {
                // After a failure the rest of the stream is dropped, not half-shown; after cancellation (the caller, the
                // client disposed, Play Mode ended) nothing of the turn runs any more. The root tokens are checked: they
                // outlive this dispatcher, whose own source may be disposed by the time a late callback runs.
                if (!Failed && !_caller.IsCancellationRequested && !_lifetime.IsCancellationRequested) action();
            }
            catch (Exception e)
            {
                lock (_lock)
                {
                    if (_error == null) _error = ExceptionDispatchInfo.Capture(e);
                }
                try
                {
                    _cts.Cancel();
                }
                catch (ObjectDisposedException)
                {
                    // The stream already ended; the error is still reported by ThrowIfFailed.
                }
            }
            finally
            {
                lock (_lock)
                {
                    _pending--;
                    if (_pending == 0 && _closed) _drained.TrySetResult(true);
                }
            }
        }
    }
}
