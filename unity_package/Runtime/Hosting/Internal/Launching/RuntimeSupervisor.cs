using System;
using System.Threading;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The launcher's watchdog: a background thread that notices when the runtime died and restarts it after 1 s, 2 s,
    /// 4 s … (at most RestartBackoffMax), giving up after MaxRestartAttempts failures in a row; a runtime that ran for
    /// StableUptime starts the series over. It ends with the launcher's lifetime (Stop, Detach).
    /// </summary>
    internal sealed class RuntimeSupervisor
    {
        private readonly RuntimeLauncher launcher;
        private readonly RuntimeLaunchOptions options;
        private readonly object gate = new object();
        private Thread thread;

        public RuntimeSupervisor(RuntimeLauncher launcher, RuntimeLaunchOptions options)
        {
            this.launcher = launcher;
            this.options = options;
        }

        /// <summary>Starts watching until `lifetime` is cancelled (a no-op while a watchdog runs).</summary>
        public void Begin(CancellationToken lifetime)
        {
            lock (gate)
            {
                if (thread != null && thread.IsAlive) return;
                thread = new Thread(() => WatchUntilEnd(lifetime))
                {
                    IsBackground = true, Name = "CoreAI runtime watchdog"
                };
                thread.Start();
            }
        }

        /// <summary>Waits at most `join` for the watchdog to end (its lifetime must be cancelled first).</summary>
        public void End(TimeSpan join)
        {
            Thread running;
            lock (gate)
            {
                running = thread;
                thread = null;
            }
            if (running != null && running != Thread.CurrentThread) running.Join(join);
        }

        /// <summary>
        /// The thread's body. An exception that escapes a thread ends the process on Mono and IL2CPP players, so a
        /// fault here ends the watching instead, said once as GaveUp: the game keeps running without automatic restarts.
        /// </summary>
        private void WatchUntilEnd(CancellationToken cancel)
        {
            try
            {
                Watch(cancel);
            }
            catch (Exception e)
            {
                try
                {
                    launcher.Raise(RuntimeLauncherEventKind.GaveUp, 0, 0, TimeSpan.Zero,
                                   "the watchdog stopped on an internal error (" + e.GetType().Name + ")");
                }
                catch (Exception)
                {
                    // Nothing left to tell it to: the thread still must not end the process.
                }
            }
        }

        private void Watch(CancellationToken cancel)
        {
            int series = 0;  // restart attempts since the runtime last ran stably
            while (!cancel.WaitHandle.WaitOne(options.WatchInterval))
            {
                StartedRuntime running = launcher.Current;
                if (running == null) return;
                if (launcher.IsAlive(running)) continue;
                string exit = launcher.ForgetDead(running, cancel);
                if (exit == null) return;
                launcher.Raise(RuntimeLauncherEventKind.Exited, running.Endpoint.ProcessId, 0, TimeSpan.Zero, exit);
                if (!options.RestartOnExit) return;
                if (DateTime.UtcNow - running.StartedAtUtc >= options.StableUptime) series = 0;
                if (!Restart(cancel, ref series)) return;
            }
        }

        private bool Restart(CancellationToken cancel, ref int series)
        {
            int failedInRow = 0;
            while (true)
            {
                series++;
                TimeSpan delay = launcher.Backoff(series);
                launcher.Raise(RuntimeLauncherEventKind.Restarting, 0, series, delay, "");
                if (cancel.WaitHandle.WaitOne(delay)) return false;
                try
                {
                    StartedRuntime restarted = launcher.Restart(cancel);
                    if (restarted == null) return false;
                    launcher.Raise(RuntimeLauncherEventKind.Restarted, restarted.Endpoint.ProcessId, series, delay, "");
                    return true;
                }
                catch (RuntimeLaunchException e)
                {
                    if (e.Failure == RuntimeLaunchFailure.Stopped || e.Failure == RuntimeLaunchFailure.Detached
                        || cancel.IsCancellationRequested) return false;
                    failedInRow++;
                    launcher.Raise(RuntimeLauncherEventKind.RestartFailed, 0, series, delay, e.Message);
                    if (options.MaxRestartAttempts > 0 && failedInRow >= options.MaxRestartAttempts)
                    {
                        launcher.Raise(RuntimeLauncherEventKind.GaveUp, 0, series, delay, failedInRow + " restart attempts failed in a row");
                        return false;
                    }
                }
            }
        }
    }
}
