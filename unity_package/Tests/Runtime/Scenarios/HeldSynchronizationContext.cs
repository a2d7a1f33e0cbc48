// A caller's SynchronizationContext that is not pumped (Unity's main thread inside a long frame): everything posted
// to it waits until the test releases it, so a test can check that storage never waits for its caller's context.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Tests
{
    /// <summary>Holds posted callbacks until <see cref="ReleaseCallbacks"/>; from then on runs them on the thread pool.</summary>
    public sealed class HeldSynchronizationContext : SynchronizationContext
    {
        private readonly object _gate = new object();
        private readonly Queue<KeyValuePair<SendOrPostCallback, object>> _pending =
            new Queue<KeyValuePair<SendOrPostCallback, object>>();
        private bool _released;
        private bool _posted;

        /// <summary>True once anything was posted (an async call's continuation is waiting for this context).</summary>
        public bool Posted
        {
            get { lock (_gate) { return _posted; } }
        }

        public override void Post(SendOrPostCallback d, object state)
        {
            lock (_gate)
            {
                _posted = true;
                if (!_released)
                {
                    _pending.Enqueue(new KeyValuePair<SendOrPostCallback, object>(d, state));
                    return;
                }
            }
            Dispatch(d, state);
        }

        public override void Send(SendOrPostCallback d, object state)
        {
            throw new NotSupportedException("a held context runs nothing synchronously");
        }

        public override SynchronizationContext CreateCopy()
        {
            return this;
        }

        /// <summary>Start an operation the way a caller on this context does: with this context current while it starts.</summary>
        public Task Start(Func<Task> operation)
        {
            SynchronizationContext original = Current;
            SetSynchronizationContext(this);
            try
            {
                return operation();
            }
            finally
            {
                SetSynchronizationContext(original);
            }
        }

        /// <summary>Run what was held, and everything posted from now on.</summary>
        public void ReleaseCallbacks()
        {
            lock (_gate)
            {
                _released = true;
                while (_pending.Count > 0)
                {
                    KeyValuePair<SendOrPostCallback, object> item = _pending.Dequeue();
                    Dispatch(item.Key, item.Value);
                }
            }
        }

        private void Dispatch(SendOrPostCallback d, object state)
        {
            ThreadPool.QueueUserWorkItem(_ =>
            {
                SynchronizationContext original = Current;
                try
                {
                    SetSynchronizationContext(this);
                    d(state);
                }
                finally
                {
                    SetSynchronizationContext(original);
                }
            });
        }
    }
}
