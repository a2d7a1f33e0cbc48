using System;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Stops a runtime: first the authenticated Shutdown call (every OS; the only graceful way on Windows, which has no
    /// SIGTERM), else SIGTERM on Linux and macOS; a runtime that has not ended after the timeout is killed. Either
    /// blocking (<see cref="Stop"/>: deleting saves, replacing a runtime) or bounded (<see cref="StopWithin"/>: quitting
    /// the game, where the main thread may wait only briefly).
    /// </summary>
    internal static class RuntimeStopper
    {
        private static readonly TimeSpan Poll = TimeSpan.FromMilliseconds(50);
        private static readonly TimeSpan KillWait = TimeSpan.FromSeconds(5);

        /// <summary>
        /// Stops `pid` (the process `owned` when this launcher started it) and returns once it ended or was killed.
        /// `baseUrl` and `token` null: no Shutdown call (a process that is not a runtime of ours).
        /// </summary>
        public static void Stop(int pid, SpawnedProcess owned, TimeSpan timeout, string baseUrl, string token)
        {
            ProcessSpawner spawner = ProcessSpawner.Current;
            if (!IsAlive(spawner, pid, owned)) return;
            bool asked = !string.IsNullOrEmpty(baseUrl) && !string.IsNullOrEmpty(token)
                && HealthProbe.RequestShutdown(baseUrl, token, ShutdownCallTimeout(timeout));
            if (!asked && !spawner.Terminate(pid)) Kill(spawner, pid, owned);  // Windows without an answer: nothing gentler exists
            if (WaitGone(spawner, pid, owned, timeout)) return;
            Kill(spawner, pid, owned);
            WaitGone(spawner, pid, owned, KillWait);
        }

        /// <summary>
        /// Stops `pid` as <see cref="Stop"/> does, but the calling thread waits at most `budget`: the graceful part runs on
        /// a worker, and a runtime still running when the budget is spent is killed at once. True when it stopped
        /// gracefully within the budget. The worker finishes the bookkeeping (`then`) on its own.
        /// </summary>
        public static bool StopWithin(int pid, SpawnedProcess owned, TimeSpan budget, TimeSpan timeout, string baseUrl, string token,
            Action then)
        {
            Task graceful = Task.Run(() =>
            {
                try
                {
                    Stop(pid, owned, timeout, baseUrl, token);
                }
                finally
                {
                    if (then != null) then();
                }
            });
            if (graceful.Wait(budget)) return true;
            ProcessSpawner spawner = ProcessSpawner.Current;
            Kill(spawner, pid, owned);
            return false;
        }

        /// <summary>True while `pid` runs; `owned` (when it is that process) is asked first, which also reaps it.</summary>
        public static bool IsAlive(ProcessSpawner spawner, int pid, SpawnedProcess owned)
        {
            if (pid <= 0) return false;
            if (owned != null && owned.Id == pid) return !owned.HasExited;
            return spawner.IsAlive(pid);
        }

        private static bool WaitGone(ProcessSpawner spawner, int pid, SpawnedProcess owned, TimeSpan timeout)
        {
            DateTime deadline = DateTime.UtcNow + timeout;
            while (IsAlive(spawner, pid, owned))
            {
                if (DateTime.UtcNow >= deadline) return false;
                Thread.Sleep(Poll);
            }
            return true;
        }

        private static void Kill(ProcessSpawner spawner, int pid, SpawnedProcess owned)
        {
            if (owned != null && owned.Id == pid) owned.Kill();
            else spawner.Kill(pid);
        }

        private static TimeSpan ShutdownCallTimeout(TimeSpan stopTimeout)
        {
            TimeSpan two = TimeSpan.FromSeconds(2);
            return stopTimeout < two ? stopTimeout : two;
        }
    }
}
