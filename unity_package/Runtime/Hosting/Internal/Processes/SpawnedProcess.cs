using System;
using System.Threading;

namespace CoreAI.Launcher
{
    /// <summary>A process this process started: its id, whether and how it ended, and a way to end it.</summary>
    internal abstract class SpawnedProcess : IDisposable
    {
        private static readonly TimeSpan Poll = TimeSpan.FromMilliseconds(20);

        /// <summary>The process id.</summary>
        public abstract int Id { get; }

        /// <summary>True once it ended (on Linux and macOS asking also reaps it, so no zombie stays behind).</summary>
        public abstract bool HasExited { get; }

        /// <summary>Its exit code once it ended (128 + the signal when a signal ended it); -1 before, or when unknown.</summary>
        public abstract int ExitCode { get; }

        /// <summary>Ends it at once (SIGKILL, TerminateProcess); no error when it already ended.</summary>
        public abstract void Kill();

        /// <summary>Waits until it ended or `timeout` passed; true when it ended.</summary>
        public bool WaitForExit(TimeSpan timeout)
        {
            DateTime deadline = DateTime.UtcNow + timeout;
            while (!HasExited)
            {
                if (DateTime.UtcNow >= deadline) return false;
                Thread.Sleep(Poll);
            }
            return true;
        }

        /// <summary>Lets go of the handle; the process keeps running.</summary>
        public virtual void Dispose()
        {
        }
    }
}
