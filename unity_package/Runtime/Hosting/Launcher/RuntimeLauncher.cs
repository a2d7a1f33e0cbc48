using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Starts `coreai-runtime serve` for a game and looks after it: waits until it answers health, reuses the runtime
    /// this project already started (after an editor domain reload) instead of spawning another, restarts it with
    /// backoff when it dies, and stops it on request. Plain C#: no UnityEngine, usable from the editor, a player or a
    /// test. The parts are their own types: <see cref="RuntimeStarter"/> (reuse or spawn, under the start lock),
    /// <see cref="RuntimeSupervisor"/> (the watchdog), <see cref="RuntimeStopper"/> (graceful stop, then kill); processes
    /// are started by <see cref="ProcessSpawner"/> (posix_spawn, CreateProcessW) on every scripting backend.
    /// </summary>
    public sealed class RuntimeLauncher : IDisposable
    {
        /// <summary>The environment variable that carries the token to the runtime (never the command line).</summary>
        public const string TokenEnvironmentVariable = "COREAI_RUNTIME_TOKEN";

        /// <summary>The environment variable that carries the external server's API key (LlmApiKey) to the runtime.</summary>
        public const string LlmApiKeyEnvironmentVariable = "COREAI_LLM_API_KEY";

        private static readonly List<RuntimeLauncher> Live = new List<RuntimeLauncher>();  // of this process, for StopAll

        private readonly RuntimeLaunchOptions options;
        private readonly RuntimeStarter starter;
        private readonly RuntimeSupervisor supervisor;
        private readonly object gate = new object();       // short: the fields below
        private readonly object startGate = new object();  // long: one start or restart of this launcher at a time
        private readonly RuntimeEventLog events = new RuntimeEventLog();
        private StartedRuntime current;
        private CancellationTokenSource lifetime = new CancellationTokenSource();
        private volatile bool lettingGo;  // Detach: a start in progress leaves its runtime running for the next launcher
        private int restartCount;

        /// <summary>A launcher for `options` (validated here; nothing starts until Start).</summary>
        public RuntimeLauncher(RuntimeLaunchOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            options.Validate();
            this.options = options;
            starter = new RuntimeStarter(options, (kind, message) => Raise(kind, 0, 0, TimeSpan.Zero, message), () => lettingGo);
            supervisor = new RuntimeSupervisor(this, options);
        }

        /// <summary>Raised on the launcher's own thread (never the main thread) for starts, deaths, restarts and stops.</summary>
        public event Action<RuntimeLauncherEvent> EventRaised
        {
            add { events.Raised += value; }
            remove { events.Raised -= value; }
        }

        /// <summary>`&lt;DataDir&gt;/CoreAI/runtime`: the launcher's state file and the runtime's log.</summary>
        public string RuntimeFolder
        {
            get { return options.RuntimeFolder; }
        }

        /// <summary>The state file that lets the next launcher find this runtime.</summary>
        public string StateFilePath
        {
            get { return starter.StateFilePath; }
        }

        /// <summary>The runtime's log (stdout and stderr, written by the runtime itself); the previous run's is `runtime.log.1`.</summary>
        public string LogFilePath
        {
            get { return options.LogFilePath; }
        }

        /// <summary>Where the runtime answers; null while none is running.</summary>
        public RuntimeEndpoint Endpoint
        {
            get
            {
                StartedRuntime running = current;
                return running == null ? null : running.Endpoint;
            }
        }

        /// <summary>The runtime's process id; 0 while none is running.</summary>
        public int ProcessId
        {
            get
            {
                RuntimeEndpoint endpoint = Endpoint;
                return endpoint == null ? 0 : endpoint.ProcessId;
            }
        }

        /// <summary>True when the running runtime was started before (by an earlier launcher) and reused.</summary>
        public bool Reused { get; private set; }

        /// <summary>How many times this launcher restarted a runtime that died.</summary>
        public int RestartCount
        {
            get { return Volatile.Read(ref restartCount); }
        }

        /// <summary>The newest events of this launcher, oldest first (for status displays and diagnostics).</summary>
        public RuntimeLauncherEvent[] RecentEvents
        {
            get { return events.Recent(); }
        }

        /// <summary>True while the runtime's process runs.</summary>
        public bool IsRunning
        {
            get
            {
                StartedRuntime running = current;
                return running != null && IsAlive(running);
            }
        }

        /// <summary>`&lt;dataDir&gt;/CoreAI/runtime`.</summary>
        public static string RuntimeFolderOf(string dataDir)
        {
            return Path.Combine(Path.Combine(dataDir, "CoreAI"), "runtime");
        }

        /// <summary>Starts (or reuses) the runtime on a worker thread; completes when it answers health.</summary>
        public Task<RuntimeEndpoint> StartAsync(CancellationToken cancel = default(CancellationToken))
        {
            return Task.Run(() => Start(cancel));
        }

        /// <summary>
        /// Starts the runtime and blocks until it answers health (model loaded), or reuses a live one (its model may
        /// still be reloading: turns then answer UNAVAILABLE with a retry hint). Throws RuntimeLaunchException; Detached
        /// when <see cref="Detach"/> let go meanwhile (the runtime keeps starting and the next launcher reuses it).
        /// </summary>
        public RuntimeEndpoint Start(CancellationToken cancel = default(CancellationToken))
        {
            if (cancel.IsCancellationRequested) throw RuntimeStarter.Stopped();  // stopped before it began: nothing is spawned
            lock (startGate)
            {
                CancellationToken stop;
                lock (gate)
                {
                    if (current != null && IsAlive(current)) return current.Endpoint;
                    if (lifetime.IsCancellationRequested)
                    {
                        lifetime = new CancellationTokenSource();
                        lettingGo = false;
                    }
                    stop = lifetime.Token;
                }
                lock (Live)
                {
                    if (!Live.Contains(this)) Live.Add(this);
                }
                StartedRuntime started;
                using (CancellationTokenSource linked = CancellationTokenSource.CreateLinkedTokenSource(cancel, stop))
                {
                    started = starter.StartOrReuse(linked.Token);
                }
                if (!Adopt(started, stop)) throw lettingGo ? RuntimeStarter.Detached() : RuntimeStarter.Stopped();
                Raise(started.Reused ? RuntimeLauncherEventKind.Reused : RuntimeLauncherEventKind.Started, started.Endpoint.ProcessId, 0,
                    TimeSpan.Zero, "");
                supervisor.Begin(stop);
                return started.Endpoint;
            }
        }

        /// <summary>
        /// A client of this launcher's runtime (the caller disposes it) whose token is read from the launcher for every
        /// call: after a restart with a new token it carries on by itself, and a call sent with the old token ends
        /// with <see cref="CoreAI.Runtime.RuntimeRestartedException"/>. Policy null uses AgentMemoryPolicy.Default.
        /// </summary>
        /// <exception cref="InvalidOperationException">No runtime yet (call Start first).</exception>
        public CoreAI.Runtime.CoreAIRuntimeClient CreateClient(CoreAI.Ai.AgentMemoryPolicy policy = null)
        {
            return CreateClient(policy, null);
        }

        /// <summary>CreateClient for a game: `host` (the Unity layer's) gives it the main thread and the play session's lifetime.</summary>
        public CoreAI.Runtime.CoreAIRuntimeClient CreateClient(CoreAI.Ai.AgentMemoryPolicy policy, CoreAI.Runtime.GameHost host)
        {
            RuntimeEndpoint endpoint = Endpoint;
            if (endpoint == null) throw new InvalidOperationException("the CoreAI runtime is not running; start it first");
            string last = endpoint.Token;
            var clientOptions = new CoreAI.Runtime.ConnectClientOptions
            {
                BaseUrl = endpoint.ConnectBaseUrl,
                TokenSource = () =>
                {
                    RuntimeEndpoint now = Endpoint;
                    if (now != null) last = now.Token;
                    return last;  // between a death and the restart: the last token (the call fails as unreachable)
                },
                GameHost = host,
            };
            return new CoreAI.Runtime.CoreAIRuntimeClient(clientOptions, policy);
        }

        /// <summary>True when the runtime answers health now.</summary>
        public bool IsHealthy()
        {
            return CheckHealth() != null;
        }

        /// <summary>The runtime's health answer, or null when it does not answer.</summary>
        public RuntimeHealth CheckHealth()
        {
            RuntimeEndpoint endpoint = Endpoint;
            return endpoint == null ? null : HealthProbe.Check(endpoint.ConnectBaseUrl, options.HealthRequestTimeout, CancellationToken.None);
        }

        /// <summary>
        /// Stops the runtime (the Shutdown call, SIGTERM where there is one, killed after StopTimeout) and forgets it; a
        /// start in progress ends and what it spawned is stopped too. Blocks until the runtime ended.
        /// </summary>
        public void Stop()
        {
            StopCore(null);
        }

        /// <summary>
        /// Stop for quitting: the calling thread (Unity's main thread) waits at most `budget` for the graceful stop, then
        /// the runtime is killed and the call returns; the rest (the state file) finishes on a worker. True when it stopped
        /// gracefully in time.
        /// </summary>
        public bool StopWithin(TimeSpan budget)
        {
            return StopCore(budget);
        }

        private bool StopCore(TimeSpan? budget)
        {
            lock (gate) lifetime.Cancel();  // the watchdog and a start in progress end with it
            supervisor.End(budget.HasValue ? budget.Value : TimeSpan.FromSeconds(30));
            lock (Live) Live.Remove(this);
            StartedRuntime stopped;
            bool graceful = true;
            // A start in progress ends at once (its token is cancelled) and stops what it spawned; a quit does not wait for it.
            bool locked = budget.HasValue ? Monitor.TryEnter(startGate, budget.Value) : Monitor.TryEnter(startGate, Timeout.Infinite);
            try
            {
                lock (gate)
                {
                    stopped = current;
                    current = null;
                }
                if (stopped != null)
                {
                    int pid = stopped.Endpoint.ProcessId;
                    Action forget = () =>
                    {
                        RuntimeStateFile.Delete(StateFilePath, pid);
                        if (stopped.Process != null) stopped.Process.Dispose();
                    };
                    if (budget.HasValue)
                    {
                        graceful = RuntimeStopper.StopWithin(pid, stopped.Process, budget.Value, options.StopTimeout,
                            stopped.Endpoint.ConnectBaseUrl, stopped.Endpoint.Token, forget);
                    }
                    else
                    {
                        RuntimeStopper.Stop(pid, stopped.Process, options.StopTimeout, stopped.Endpoint.ConnectBaseUrl, stopped.Endpoint.Token);
                        forget();
                    }
                }
            }
            finally
            {
                if (locked) Monitor.Exit(startGate);
            }
            if (stopped != null) Raise(RuntimeLauncherEventKind.Stopped, stopped.Endpoint.ProcessId, 0, TimeSpan.Zero, graceful ? "" : "killed");
            return graceful;
        }

        /// <summary>
        /// Lets go of the runtime without stopping it (before an editor domain reload, on Stop in the editor): the next
        /// launcher of this project and data dir reuses it. Returns at once, also while the runtime is still starting:
        /// that start ends with Detached and leaves the runtime starting, recorded for the next launcher.
        /// </summary>
        public void Detach()
        {
            lock (Live) Live.Remove(this);
            lock (gate)
            {
                lettingGo = true;
                lifetime.Cancel();
                if (current != null && current.Process != null) current.Process.Dispose();
                current = null;
            }
            // No join: the watchdog sees the cancelled token within a probe (at most HealthRequestTimeout) and ends alone.
        }

        /// <summary>
        /// Stops every runtime this process's launchers run with `dataDir` (their watchdogs first, so none restarts one),
        /// then any other recorded there (StopRecorded). For deleting the saves: nothing may write them meanwhile.
        /// </summary>
        public static bool StopAll(string dataDir, TimeSpan timeout)
        {
            List<RuntimeLauncher> ours = new List<RuntimeLauncher>();
            string full = Path.GetFullPath(dataDir);
            lock (Live)
            {
                foreach (RuntimeLauncher launcher in Live)
                {
                    if (string.Equals(Path.GetFullPath(launcher.options.DataDir), full, StringComparison.Ordinal)) ours.Add(launcher);
                }
            }
            bool stopped = false;
            foreach (RuntimeLauncher launcher in ours)
            {
                stopped |= launcher.ProcessId != 0;
                launcher.Stop();
            }
            return StopRecorded(dataDir, timeout) || stopped;
        }

        /// <summary>Same as Stop.</summary>
        public void Dispose()
        {
            Stop();
        }

        /// <summary>
        /// Stops the runtime recorded under `dataDir` (the game's and the editor's) if it is alive and accepts its recorded
        /// token (so an unrelated process that reuses the pid is never touched); returns true when one was stopped.
        /// </summary>
        public static bool StopRecorded(string dataDir, TimeSpan timeout)
        {
            return RecordedRuntimes.Stop(dataDir, timeout);
        }

        /// <summary>
        /// True when a runtime recorded under `dataDir` (the game's or the editor's) runs from `folder`: "Fetch Runtime"
        /// then installs beside it instead of swapping the folder under it.
        /// </summary>
        public static bool RunsFrom(string dataDir, string folder)
        {
            return RecordedRuntimes.RunFrom(dataDir, folder);
        }

        /// <summary>Delay before restart attempt `attempt` (1-based): initial, doubled each time, capped.</summary>
        public TimeSpan Backoff(int attempt)
        {
            double factor = Math.Pow(2, Math.Min(30, Math.Max(0, attempt - 1)));
            double ms = Math.Min(options.RestartBackoffMax.TotalMilliseconds, options.RestartBackoffInitial.TotalMilliseconds * factor);
            return TimeSpan.FromMilliseconds(ms);
        }

        /// <summary>Port triples (Connect, gRPC, model) for a project, the same sequence every time: 20000-31999, below
        /// the OS's ephemeral ranges (Linux from 32768, Windows and macOS from 49152).</summary>
        public static IEnumerable<int[]> PortCandidates(string projectKey)
        {
            return PortChooser.Candidates(projectKey);
        }

        // ---- what the supervisor uses ----

        /// <summary>The runtime this launcher looks after now (null: none).</summary>
        internal StartedRuntime Current
        {
            get { return current; }
        }

        /// <summary>True while `running`'s process runs (its own handle is asked first, which also reaps it).</summary>
        internal bool IsAlive(StartedRuntime running)
        {
            return RuntimeStopper.IsAlive(ProcessSpawner.Current, running.Endpoint.ProcessId, running.Process);
        }

        /// <summary>Forgets `dead` when it is still the current runtime and the lifetime was not ended; its exit, or null.</summary>
        internal string ForgetDead(StartedRuntime dead, CancellationToken cancel)
        {
            lock (gate)
            {
                if (cancel.IsCancellationRequested || current != dead) return null;
                string exit = dead.Process != null && dead.Process.HasExited ? "exit code " + dead.Process.ExitCode : "";
                RuntimeStateFile.Delete(StateFilePath, dead.Endpoint.ProcessId);
                current = null;
                if (dead.Process != null) dead.Process.Dispose();
                return exit;
            }
        }

        /// <summary>A restart: reuse or spawn under both locks, then adopt; false when Stop or Detach came meanwhile.</summary>
        internal StartedRuntime Restart(CancellationToken cancel)
        {
            lock (startGate)
            {
                if (cancel.IsCancellationRequested) return null;
                // Another launcher watching the same runtime (Play Mode and the Memory Inspector share one) may have
                // restarted it already: the starter takes that one instead of fighting over the ports.
                StartedRuntime restarted = starter.StartOrReuse(cancel);
                if (!Adopt(restarted, cancel)) return null;
                Interlocked.Increment(ref restartCount);
                return restarted;
            }
        }

        /// <summary>
        /// Makes `started` this launcher's runtime, unless Stop or Detach came meanwhile (false): then a runtime this start
        /// spawned is stopped for Stop, and left running (recorded) for Detach.
        /// </summary>
        private bool Adopt(StartedRuntime started, CancellationToken stop)
        {
            lock (gate)
            {
                if (!stop.IsCancellationRequested)
                {
                    current = started;
                    Reused = started.Reused;
                    return true;
                }
            }
            if (!lettingGo && !started.Reused)
            {
                RuntimeStopper.Stop(started.Endpoint.ProcessId, started.Process, options.StopTimeout, started.Endpoint.ConnectBaseUrl,
                    started.Endpoint.Token);
                RuntimeStateFile.Delete(StateFilePath, started.Endpoint.ProcessId);
            }
            if (started.Process != null) started.Process.Dispose();
            return false;
        }

        internal void Raise(RuntimeLauncherEventKind kind, int pid, int attempt, TimeSpan delay, string message)
        {
            events.Raise(new RuntimeLauncherEvent(kind, pid, attempt, delay, message));
        }
    }
}
