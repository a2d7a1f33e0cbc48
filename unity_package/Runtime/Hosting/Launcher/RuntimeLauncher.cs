using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Starts `coreai-runtime serve` for a game and looks after it: waits until it answers health,
    /// reuses the runtime this project already started (after an editor domain reload) instead of
    /// spawning another, restarts it with backoff when it dies, and stops it on request.
    /// Plain C#: no UnityEngine, usable from the editor, a player or a test.
    /// </summary>
    public sealed class RuntimeLauncher : IDisposable
    {
        /// <summary>The environment variable that carries the token to the runtime (never the command line).</summary>
        public const string TokenEnvironmentVariable = "COREAI_RUNTIME_TOKEN";

        private const int LogTailLines = 30;
        private static readonly TimeSpan PollInterval = TimeSpan.FromMilliseconds(100);

        /// <summary>The environment variable that carries the external server's API key (LlmApiKey) to the runtime.</summary>
        public const string LlmApiKeyEnvironmentVariable = "COREAI_LLM_API_KEY";

        private static readonly List<RuntimeLauncher> Live = new List<RuntimeLauncher>();  // of this process, for StopAll

        private readonly RuntimeLaunchOptions options;
        private readonly object gate = new object();       // short: the fields below
        private readonly object startGate = new object();  // long: one start or restart of this launcher at a time
        private Process process; // the process this launcher spawned; null when it reused one
        private RuntimeEndpoint endpoint;
        private DateTime startedAtUtc;
        private Thread watchdog;
        private CancellationTokenSource lifetime = new CancellationTokenSource();
        private volatile bool lettingGo; // Detach: a start in progress leaves its runtime running for the next launcher
        private int restartCount;
        private readonly List<RuntimeLauncherEvent> history = new List<RuntimeLauncherEvent>();
        private const int HistoryLimit = 64;

        /// <summary>A launcher for `options` (validated here; nothing starts until Start).</summary>
        public RuntimeLauncher(RuntimeLaunchOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            options.Validate();
            this.options = options;
        }

        /// <summary>Raised on the launcher's own thread (never the main thread) for starts, deaths, restarts and stops.</summary>
        public event Action<RuntimeLauncherEvent> EventRaised;

        /// <summary>`&lt;DataDir&gt;/CoreAI/runtime`: the launcher's state file and the runtime's log.</summary>
        public string RuntimeFolder
        {
            get { return options.RuntimeFolder; }
        }

        /// <summary>The state file that lets the next launcher find this runtime.</summary>
        public string StateFilePath
        {
            get { return Path.Combine(RuntimeFolder, "launcher.json"); }
        }

        /// <summary>The runtime's log (stdout and stderr, written by the runtime itself); the previous run's is `runtime.log.1`.</summary>
        public string LogFilePath
        {
            get { return options.LogFilePath; }
        }

        /// <summary>Where the runtime answers; null while none is running.</summary>
        public RuntimeEndpoint Endpoint
        {
            get { return endpoint; }
        }

        /// <summary>The runtime's process id; 0 while none is running.</summary>
        public int ProcessId
        {
            get
            {
                RuntimeEndpoint current = endpoint;
                return current == null ? 0 : current.ProcessId;
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
            get { lock (history) return history.ToArray(); }
        }

        /// <summary>True while the runtime's process runs.</summary>
        public bool IsRunning
        {
            get
            {
                RuntimeEndpoint current = endpoint;
                return current != null && IsProcessAlive(current.ProcessId);
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
            lock (startGate)
            {
                CancellationToken stop;
                lock (gate)
                {
                    if (endpoint != null && IsProcessAlive(endpoint.ProcessId)) return endpoint;
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
                RuntimeEndpoint started;
                bool reused;
                using (CancellationTokenSource linked = CancellationTokenSource.CreateLinkedTokenSource(cancel, stop))
                {
                    Directory.CreateDirectory(RuntimeFolder);
                    using (AcquireStartLock(linked.Token))
                    {
                        started = TryReuse(linked.Token);
                        reused = started != null;
                        if (!reused) started = Launch(linked.Token);
                    }
                }
                if (!Adopt(started, reused, stop))
                {
                    throw lettingGo ? Detached() : Stopped();
                }
                Raise(reused ? RuntimeLauncherEventKind.Reused : RuntimeLauncherEventKind.Started, started.ProcessId, 0, TimeSpan.Zero, "");
                StartWatchdog();
                return started;
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
            RuntimeEndpoint current = endpoint;
            if (current == null) throw new InvalidOperationException("the CoreAI runtime is not running; start it first");
            string last = current.Token;
            var options = new CoreAI.Runtime.ConnectClientOptions
            {
                BaseUrl = current.ConnectBaseUrl,
                TokenSource = () =>
                {
                    RuntimeEndpoint now = endpoint;
                    if (now != null) last = now.Token;
                    return last;  // between a death and the restart: the last token (the call fails as unreachable)
                },
                GameHost = host,
            };
            return new CoreAI.Runtime.CoreAIRuntimeClient(options, policy);
        }

        /// <summary>True when the runtime answers health now.</summary>
        public bool IsHealthy()
        {
            RuntimeEndpoint current = endpoint;
            return current != null && HealthProbe.Check(current.ConnectBaseUrl, options.HealthRequestTimeout, CancellationToken.None) != null;
        }

        /// <summary>The runtime's health answer, or null when it does not answer.</summary>
        public RuntimeHealth CheckHealth()
        {
            RuntimeEndpoint current = endpoint;
            return current == null ? null : HealthProbe.Check(current.ConnectBaseUrl, options.HealthRequestTimeout, CancellationToken.None);
        }

        /// <summary>
        /// Stops the runtime (the Shutdown call, SIGTERM where there is one, killed after StopTimeout) and forgets it; a
        /// start in progress ends and what it spawned is stopped too. Call on quit.
        /// </summary>
        public void Stop()
        {
            EndWatchdog();
            lock (Live) Live.Remove(this);
            int pid;
            lock (startGate)  // a start in progress ends at once (its token is cancelled) and stops what it spawned
            {
                RuntimeEndpoint current;
                Process owned;
                lock (gate)
                {
                    current = endpoint;
                    owned = process;
                    endpoint = null;
                    process = null;
                }
                pid = current == null ? 0 : current.ProcessId;
                if (pid != 0)
                {
                    ProcessControl.Stop(pid, owned, options.StopTimeout, current.ConnectBaseUrl, current.Token);
                    RuntimeStateFile.Delete(StateFilePath, pid);
                }
                if (owned != null) owned.Dispose();
            }
            if (pid != 0) Raise(RuntimeLauncherEventKind.Stopped, pid, 0, TimeSpan.Zero, "");
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
                endpoint = null;
                DisposeProcess();
                watchdog = null;
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
        /// Stops the runtime recorded under `dataDir` if it is alive and accepts its recorded token
        /// (so an unrelated process that reuses the pid is never touched); returns true when one was stopped.
        /// </summary>
        public static bool StopRecorded(string dataDir, TimeSpan timeout)
        {
            // The game's and the editor's runtime: both use the saves under dataDir.
            bool game = StopRecordedAt(Path.Combine(RuntimeFolderOf(dataDir), "launcher.json"), timeout);
            bool editor = StopRecordedAt(
                Path.Combine(Path.Combine(RuntimeFolderOf(dataDir), RuntimeLaunchOptions.EditorInstance), "launcher.json"), timeout);
            return game || editor;
        }

        private static bool StopRecordedAt(string statePath, TimeSpan timeout)
        {
            RuntimeState state = RuntimeStateFile.Read(statePath);
            if (state == null) return false;
            string url = BaseUrl(state.Host, state.ConnectPort);
            bool ours = ProcessControl.IsAlive(state.ProcessId)
                && HealthProbe.AcceptsToken(url, state.Token, TimeSpan.FromSeconds(2), CancellationToken.None);
            if (ours) ProcessControl.Stop(state.ProcessId, null, timeout, url, state.Token);
            RuntimeStateFile.Delete(statePath, 0);
            return ours;
        }

        private static string BaseUrl(string host, int port)
        {
            return "http://" + host + ":" + port;
        }

        private IDisposable AcquireStartLock(CancellationToken cancel)
        {
            string path = Path.Combine(RuntimeFolder, "launcher.lock");
            DateTime deadline = DateTime.UtcNow + options.StartTimeout;
            while (true)
            {
                try
                {
                    return new FileStream(path, FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.None);
                }
                catch (IOException)
                {
                    if (DateTime.UtcNow > deadline) throw new RuntimeLaunchException(RuntimeLaunchFailure.StartTimeout,
                        "another launcher kept the start lock for longer than StartTimeout (" + options.StartTimeout.TotalSeconds + " s)");
                }
                if (cancel.WaitHandle.WaitOne(PollInterval)) throw Stopped();
            }
        }

        private RuntimeEndpoint TryReuse(CancellationToken cancel)
        {
            RuntimeState state = RuntimeStateFile.Read(StateFilePath);
            if (state == null) return null;
            if (!ProcessControl.IsAlive(state.ProcessId))
            {
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            string url = BaseUrl(state.Host, state.ConnectPort);
            // A runtime still starting (its launcher let go, e.g. at a domain reload during the first model load): wait
            // for it rather than start a second one that would only find the ports taken.
            if (state.Starting && !WaitForStarting(state, url, cancel))
            {
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            // Liveness, not readiness: a runtime caught while its model (re)loads answers /healthz 503 but is
            // still ours to reuse; starting a second one would only find the ports taken.
            bool answers = HealthProbe.IsLive(url, options.HealthRequestTimeout, cancel)
                && HealthProbe.AcceptsToken(url, state.Token, options.HealthRequestTimeout, cancel);
            if (!answers)
            {
                // A hung runtime, or a pid now used by another program: never kill what we cannot identify.
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            if ((state.ProjectId ?? "") != (options.ProjectId ?? ""))
                throw new RuntimeLaunchException(RuntimeLaunchFailure.PortInUse,
                    "a CoreAI runtime started by another project (same persistentDataPath) is running on port "
                    + state.ConnectPort + "; stop it first (or give this project its own product name)");
            bool sameSettings = state.Fingerprint == options.Fingerprint()
                && (string.IsNullOrEmpty(options.Token) || options.Token == state.Token);
            if (!sameSettings)
            {
                // Our own runtime, started with other settings: replace it.
                ProcessControl.Stop(state.ProcessId, null, options.StopTimeout, url, state.Token);
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            startedAtUtc = state.StartedAtUtc;
            return new RuntimeEndpoint(state.Host, state.ConnectPort, state.GrpcPort, state.ModelPort, state.Token, state.ProcessId);
        }

        /// <summary>
        /// Makes `started` this launcher's runtime, unless Stop or Detach came meanwhile (false): then a runtime this start
        /// spawned is stopped for Stop, and left running (recorded) for Detach.
        /// </summary>
        private bool Adopt(RuntimeEndpoint started, bool reused, CancellationToken stop)
        {
            Process owned;
            lock (gate)
            {
                if (!stop.IsCancellationRequested)
                {
                    endpoint = started;
                    Reused = reused;
                    return true;
                }
                owned = process != null && process.Id == started.ProcessId ? process : null;
                if (owned != null) process = null;
            }
            if (!lettingGo && !reused)
            {
                ProcessControl.Stop(started.ProcessId, owned, options.StopTimeout, started.ConnectBaseUrl, started.Token);
                RuntimeStateFile.Delete(StateFilePath, started.ProcessId);
            }
            if (owned != null) owned.Dispose();
            return false;
        }

        /// <summary>Until the recorded, still starting runtime answers health (true), exits or StartTimeout passes (false).</summary>
        private bool WaitForStarting(RuntimeState state, string url, CancellationToken cancel)
        {
            DateTime deadline = DateTime.UtcNow + options.StartTimeout;
            while (ProcessControl.IsAlive(state.ProcessId))
            {
                if (HealthProbe.Check(url, options.HealthRequestTimeout, cancel) != null) return true;
                if (DateTime.UtcNow > deadline) return false;
                if (cancel.WaitHandle.WaitOne(PollInterval)) throw lettingGo ? Detached() : Stopped();
            }
            return false;
        }

        private RuntimeEndpoint Launch(CancellationToken cancel)
        {
            string exe = ExecutableResolver.Resolve(options.RuntimePath);
            if (exe == null)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.RuntimeNotFound, ExecutableResolver.NotFoundMessage(options.RuntimePath));
            // A bundled runtime loses its executable bit through a Windows cross-build, a zip, Perforce or a store upload.
            if (!Platform.IsWindows && !Posix.EnsureExecutable(exe))
                throw new RuntimeLaunchException(RuntimeLaunchFailure.SpawnFailed,
                    "the CoreAI runtime '" + exe + "' is not executable and could not be made so (chmod 755 failed, errno " + Posix.LastError + ")");
            RuntimeLaunchOptions launch = ChoosePorts();
            string token = string.IsNullOrEmpty(options.Token) ? Digest.NewToken() : options.Token;
            RotateLog();
            Dictionary<string, string> env = new Dictionary<string, string>();
            env["PYTHONUNBUFFERED"] = "1"; // log lines reach the file as they happen
            if (options.Environment != null)
            {
                foreach (KeyValuePair<string, string> pair in options.Environment) env[pair.Key] = pair.Value;
            }
            env[TokenEnvironmentVariable] = token;
            if (!string.IsNullOrEmpty(options.LlmApiKey)) env[LlmApiKeyEnvironmentVariable] = options.LlmApiKey;
            string workDir = string.IsNullOrEmpty(options.WorkingDirectory) ? options.DataDir : options.WorkingDirectory;
            Directory.CreateDirectory(options.DataDir);
            Process spawned;
            try
            {
                spawned = ProcessControl.Spawn(exe, launch.BuildArguments(), env, workDir, LogFilePath);
            }
            catch (Exception e) when (e is System.ComponentModel.Win32Exception || e is IOException || e is InvalidOperationException)
            {
                throw new RuntimeLaunchException(RuntimeLaunchFailure.SpawnFailed,
                    "cannot start the CoreAI runtime '" + exe + "': " + e.Message, null, e);
            }
            RuntimeEndpoint started = new RuntimeEndpoint(launch.Host, launch.ConnectPort, launch.GrpcPort, launch.ModelPort, token, spawned.Id);
            DateTime spawnedAt = DateTime.UtcNow;
            try
            {
                // Recorded at once: a launcher that lets go while the model loads leaves a runtime the next one finds.
                Record(launch, started, spawnedAt, true);
                WaitReady(spawned, exe, started, cancel);
                Record(launch, started, spawnedAt, false);
            }
            catch (Exception e)
            {
                if (lettingGo && cancel.IsCancellationRequested)
                {
                    spawned.Dispose();  // not stopped: it is recorded and keeps starting for the next launcher
                    throw Detached();
                }
                ProcessControl.Stop(spawned.Id, spawned, options.StopTimeout, started.ConnectBaseUrl, token);
                RuntimeStateFile.Delete(StateFilePath, spawned.Id);
                spawned.Dispose();
                if (e is RuntimeLaunchException) throw;
                if (e is IOException || e is UnauthorizedAccessException)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.StateFileFailed,
                        "cannot record the CoreAI runtime in " + Path.GetFileName(StateFilePath) + " (" + e.GetType().Name
                        + "); it was stopped so that it does not keep its ports", null, e);
                throw;
            }
            lock (gate)
            {
                DisposeProcess();
                process = spawned;
                startedAtUtc = spawnedAt;
            }
            return started;
        }

        private void Record(RuntimeLaunchOptions launch, RuntimeEndpoint started, DateTime startedAt, bool starting)
        {
            RuntimeStateFile.Write(StateFilePath, new RuntimeState
            {
                ProcessId = started.ProcessId,
                Host = launch.Host,
                ConnectPort = launch.ConnectPort,
                GrpcPort = launch.GrpcPort,
                ModelPort = launch.ModelPort,
                Token = started.Token,
                ProjectId = options.ProjectId ?? "",
                Fingerprint = options.Fingerprint(),
                StartedAtUtc = startedAt,
                Starting = starting,
            });
        }

        /// <summary>The options to launch with: the configured ports, or this project's own when those are taken.</summary>
        private RuntimeLaunchOptions ChoosePorts()
        {
            int taken = FirstTakenPort(options);
            if (taken == 0) return options;
            if (!options.ChoosePortsWhenTaken)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.PortInUse,
                    "port " + taken + " on " + options.Host + " is in use by another program; stop it or choose other ports in the CoreAI settings");
            foreach (int[] candidate in PortCandidates(options.ProjectId + "\n" + options.Instance))
            {
                RuntimeLaunchOptions moved = options.WithPorts(candidate[0], candidate[1], candidate[2]);
                if (FirstTakenPort(moved) != 0) continue;
                Raise(RuntimeLauncherEventKind.PortsChosen, 0, 0, TimeSpan.Zero,
                    "port " + taken + " was taken; the runtime uses Connect " + moved.ConnectPort + ", gRPC " + moved.GrpcPort
                    + (string.IsNullOrEmpty(options.LlmUrl) ? ", model " + moved.ModelPort : "") + " (this project's own ports)");
                return moved;
            }
            throw new RuntimeLaunchException(RuntimeLaunchFailure.PortInUse,
                "port " + taken + " on " + options.Host + " is in use, and so are this project's other ports; stop what uses them or choose ports in the CoreAI settings");
        }

        private static int FirstTakenPort(RuntimeLaunchOptions candidate)
        {
            foreach (int port in candidate.Ports())
            {
                if (!ProcessControl.PortIsFree(candidate.Host, port)) return port;
            }
            return 0;
        }

        /// <summary>Port triples (Connect, gRPC, model) for a project, the same sequence every time: 20000-31999, below
        /// the OS's ephemeral ranges (Linux from 32768, Windows and macOS from 49152).</summary>
        public static IEnumerable<int[]> PortCandidates(string projectKey)
        {
            string hex = Digest.Sha256Hex(projectKey ?? "");
            uint seed = Convert.ToUInt32(hex.Substring(0, 8), 16);
            const int slots = 4000;
            for (int attempt = 0; attempt < 32; attempt++)
            {
                int slot = (int)((seed + (uint)attempt * 2654435761u) % slots);
                int first = 20000 + slot * 3;
                yield return new[] { first, first + 1, first + 2 };
            }
        }

        private void WaitReady(Process spawned, string exe, RuntimeEndpoint started, CancellationToken cancel)
        {
            DateTime deadline = DateTime.UtcNow + options.StartTimeout;
            while (true)
            {
                if (cancel.IsCancellationRequested) throw Stopped();
                if (spawned.HasExited)
                {
                    spawned.WaitForExit(); // flushes the output pumps on Windows
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.ExitedDuringStart,
                        "the CoreAI runtime '" + exe + "' exited with code " + spawned.ExitCode + " while starting",
                        LogTail.Read(LogFilePath, LogTailLines));
                }
                if (HealthProbe.Check(started.ConnectBaseUrl, options.HealthRequestTimeout, cancel) != null) return;
                if (DateTime.UtcNow > deadline)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.StartTimeout,
                        "the CoreAI runtime did not answer " + started.ConnectBaseUrl + "/healthz within "
                        + options.StartTimeout.TotalSeconds + " s", LogTail.Read(LogFilePath, LogTailLines));
                if (cancel.WaitHandle.WaitOne(PollInterval)) throw Stopped();
            }
        }

        private static RuntimeLaunchException Stopped()
        {
            return new RuntimeLaunchException(RuntimeLaunchFailure.Stopped, "the launcher was stopped while starting the runtime");
        }

        private static RuntimeLaunchException Detached()
        {
            return new RuntimeLaunchException(RuntimeLaunchFailure.Detached,
                "the launcher let go while the runtime was starting; it keeps starting and the next launcher reuses it");
        }

        private void RotateLog()
        {
            try
            {
                string previous = LogFilePath + ".1";
                if (File.Exists(previous)) File.Delete(previous);
                if (File.Exists(LogFilePath)) File.Move(LogFilePath, previous);
            }
            catch (IOException)
            {
                // A log still held open (Windows) is appended to instead.
            }
        }

        private bool IsProcessAlive(int pid)
        {
            Process owned = process;
            if (owned != null && owned.Id == pid)
            {
                try
                {
                    return !owned.HasExited;
                }
                catch (InvalidOperationException)
                {
                    return false;
                }
            }
            return ProcessControl.IsAlive(pid);
        }

        private void DisposeProcess()
        {
            if (process != null) process.Dispose();
            process = null;
        }

        private void StartWatchdog()
        {
            lock (gate)
            {
                if (watchdog != null && watchdog.IsAlive) return;
                CancellationToken token = lifetime.Token;
                watchdog = new Thread(() => Watch(token)) { IsBackground = true, Name = "CoreAI runtime watchdog" };
                watchdog.Start();
            }
        }

        private void EndWatchdog()
        {
            Thread current;
            lock (gate)
            {
                lifetime.Cancel();
                current = watchdog;
                watchdog = null;
            }
            if (current != null && current != Thread.CurrentThread) current.Join(TimeSpan.FromSeconds(30));
        }

        private void Watch(CancellationToken cancel)
        {
            int series = 0; // restart attempts since the runtime last ran stably
            while (!cancel.WaitHandle.WaitOne(options.WatchInterval))
            {
                RuntimeEndpoint current = endpoint;
                if (current == null) return;
                if (IsProcessAlive(current.ProcessId)) continue;
                string exit = "";
                lock (gate)
                {
                    if (cancel.IsCancellationRequested || endpoint != current) return;
                    Process owned = process;
                    if (owned != null && owned.Id == current.ProcessId && owned.HasExited) exit = "exit code " + owned.ExitCode;
                    RuntimeStateFile.Delete(StateFilePath, current.ProcessId);
                    endpoint = null;
                    DisposeProcess();
                }
                Raise(RuntimeLauncherEventKind.Exited, current.ProcessId, 0, TimeSpan.Zero, exit);
                if (!options.RestartOnExit) return;
                if (DateTime.UtcNow - startedAtUtc >= options.StableUptime) series = 0;
                if (!Restart(cancel, ref series)) return;
            }
        }

        private bool Restart(CancellationToken cancel, ref int series)
        {
            int failedInRow = 0;
            while (true)
            {
                series++;
                TimeSpan delay = Backoff(series);
                Raise(RuntimeLauncherEventKind.Restarting, 0, series, delay, "");
                if (cancel.WaitHandle.WaitOne(delay)) return false;
                try
                {
                    RuntimeEndpoint restarted;
                    lock (startGate)
                    {
                        if (cancel.IsCancellationRequested) return false;
                        bool reused;
                        // Another launcher watching the same runtime (Play Mode and the Memory Inspector share one)
                        // may have restarted it already: take that one instead of fighting over the ports.
                        using (AcquireStartLock(cancel))
                        {
                            restarted = TryReuse(cancel);
                            reused = restarted != null;
                            if (!reused) restarted = Launch(cancel);
                        }
                        if (!Adopt(restarted, reused, cancel)) return false;
                    }
                    Interlocked.Increment(ref restartCount);
                    Raise(RuntimeLauncherEventKind.Restarted, restarted.ProcessId, series, delay, "");
                    return true;
                }
                catch (RuntimeLaunchException e)
                {
                    if (e.Failure == RuntimeLaunchFailure.Stopped || e.Failure == RuntimeLaunchFailure.Detached
                        || cancel.IsCancellationRequested) return false;
                    failedInRow++;
                    Raise(RuntimeLauncherEventKind.RestartFailed, 0, series, delay, e.Message);
                    if (options.MaxRestartAttempts > 0 && failedInRow >= options.MaxRestartAttempts)
                    {
                        Raise(RuntimeLauncherEventKind.GaveUp, 0, series, delay, failedInRow + " restart attempts failed in a row");
                        return false;
                    }
                }
            }
        }

        /// <summary>Delay before restart attempt `attempt` (1-based): initial, doubled each time, capped.</summary>
        public TimeSpan Backoff(int attempt)
        {
            double factor = Math.Pow(2, Math.Min(30, Math.Max(0, attempt - 1)));
            double ms = Math.Min(options.RestartBackoffMax.TotalMilliseconds, options.RestartBackoffInitial.TotalMilliseconds * factor);
            return TimeSpan.FromMilliseconds(ms);
        }

        private void Raise(RuntimeLauncherEventKind kind, int pid, int attempt, TimeSpan delay, string message)
        {
            RuntimeLauncherEvent e = new RuntimeLauncherEvent(kind, pid, attempt, delay, message);
            lock (history)
            {
                history.Add(e);
                if (history.Count > HistoryLimit) history.RemoveAt(0);
            }
            Action<RuntimeLauncherEvent> handler = EventRaised;
            if (handler == null) return;
            try
            {
                handler(e);
            }
            catch (Exception)
            {
                // A failing subscriber must not stop the watchdog.
            }
        }
    }
}
