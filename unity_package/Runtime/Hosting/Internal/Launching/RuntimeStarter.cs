using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using CoreAI.Downloads;
using CoreAI.Runtime;

namespace CoreAI.Launcher
{
    /// <summary>A runtime a start produced: reused (recorded by an earlier launcher) or spawned now.</summary>
    internal sealed class StartedRuntime
    {
        public RuntimeEndpoint Endpoint;
        public SpawnedProcess Process;  // null when reused
        public bool Reused;
        public DateTime StartedAtUtc;
    }

    /// <summary>
    /// One start of the project's runtime, under the start lock: reuse the recorded one when it is alive, ours and
    /// started with the same settings (replace it when the settings changed), else spawn a new one, record it at once
    /// and wait until it answers health.
    /// </summary>
    internal sealed class RuntimeStarter
    {
        private const int LogTailLines = 30;
        private static readonly TimeSpan Poll = TimeSpan.FromMilliseconds(100);

        private readonly RuntimeLaunchOptions options;
        private readonly Action<RuntimeLauncherEventKind, string> raise;
        private readonly Func<bool> lettingGo;

        /// <summary>Starts for `options`; `raise` reports PortsChosen and similar; `lettingGo` tells a Detach from a Stop.</summary>
        public RuntimeStarter(RuntimeLaunchOptions options, Action<RuntimeLauncherEventKind, string> raise, Func<bool> lettingGo)
        {
            this.options = options;
            this.raise = raise;
            this.lettingGo = lettingGo;
        }

        public string StateFilePath
        {
            get { return Path.Combine(options.RuntimeFolder, "launcher.json"); }
        }

        /// <summary>Reuses or launches under the start lock; throws RuntimeLaunchException.</summary>
        public StartedRuntime StartOrReuse(CancellationToken cancel)
        {
            Directory.CreateDirectory(options.RuntimeFolder);
            using (AcquireStartLock(cancel))
            {
                return TryReuse(cancel) ?? Launch(cancel);
            }
        }

        /// <summary>Ended by Stop while starting.</summary>
        public static RuntimeLaunchException Stopped()
        {
            return new RuntimeLaunchException(RuntimeLaunchFailure.Stopped, "the launcher was stopped while starting the runtime");
        }

        /// <summary>Let go by Detach while starting: the runtime keeps starting for the next launcher.</summary>
        public static RuntimeLaunchException Detached()
        {
            return new RuntimeLaunchException(RuntimeLaunchFailure.Detached,
                "the launcher let go while the runtime was starting; it keeps starting and the next launcher reuses it");
        }

        private IDisposable AcquireStartLock(CancellationToken cancel)
        {
            string path = Path.Combine(options.RuntimeFolder, "launcher.lock");
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
                if (cancel.WaitHandle.WaitOne(Poll)) throw Stopped();
            }
        }

        private StartedRuntime TryReuse(CancellationToken cancel)
        {
            RuntimeState state = RuntimeStateFile.Read(StateFilePath);
            if (state == null) return null;
            ProcessSpawner spawner = ProcessSpawner.Current;
            if (!RuntimeStateFile.IsAlive(state))
            {
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            string url = state.BaseUrl;
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
            if (!sameSettings && !options.ReuseAnySettings)
            {
                // Our own runtime, started with other settings (or another version of the runtime): replace it.
                RuntimeStopper.Stop(state.ProcessId, null, options.StopTimeout, url, state.Token);
                RuntimeStateFile.Delete(StateFilePath, state.ProcessId);
                return null;
            }
            return new StartedRuntime
            {
                Endpoint = new RuntimeEndpoint(state.Host, state.ConnectPort, state.GrpcPort, state.ModelPort, state.Token, state.ProcessId),
                Reused = true,
                StartedAtUtc = state.StartedAtUtc,
            };
        }

        /// <summary>Until the recorded, still starting runtime answers health (true), exits or StartTimeout passes (false).</summary>
        private bool WaitForStarting(RuntimeState state, string url, CancellationToken cancel)
        {
            DateTime deadline = DateTime.UtcNow + options.StartTimeout;
            while (RuntimeStateFile.IsAlive(state))
            {
                if (HealthProbe.Check(url, options.HealthRequestTimeout, cancel) != null) return true;
                if (DateTime.UtcNow > deadline) return false;
                if (cancel.WaitHandle.WaitOne(Poll)) throw lettingGo() ? Detached() : Stopped();
            }
            return false;
        }

        private StartedRuntime Launch(CancellationToken cancel)
        {
            string exe = ExecutableResolver.Resolve(options.RuntimePath);
            if (exe == null)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.RuntimeNotFound, ExecutableResolver.NotFoundMessage(options.RuntimePath));
            exe = SwitchToFetched(exe);
            // A bundled runtime (and its llama-server) loses its executable bit through a Windows cross-build, a zip,
            // Perforce or a store upload: restored here, before anything of it runs.
            string lost = ExecutableBits.Restore(exe);
            if (lost != null)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.SpawnFailed,
                    "'" + lost + "' of the CoreAI runtime is not executable and could not be made so (chmod 755 failed, errno " + Posix.LastError + ")");
            RuntimeLaunchOptions launch = PortChooser.Choose(options, message => raise(RuntimeLauncherEventKind.PortsChosen, message));
            string token = string.IsNullOrEmpty(options.Token) ? Digest.NewToken() : options.Token;
            RotateLog();
            Directory.CreateDirectory(options.DataDir);
            SpawnedProcess spawned;
            try
            {
                spawned = ProcessSpawner.Current.Spawn(new SpawnRequest
                {
                    Executable = exe,
                    Arguments = launch.BuildArguments(),
                    Environment = Environment(token),
                    WorkingDirectory = string.IsNullOrEmpty(options.WorkingDirectory) ? options.DataDir : options.WorkingDirectory,
                    LogPath = options.LogFilePath,
                });
            }
            catch (Exception e) when (e is SpawnException || e is IOException || e is ArgumentException || e is PlatformNotSupportedException)
            {
                throw new RuntimeLaunchException(RuntimeLaunchFailure.SpawnFailed, "cannot start the CoreAI runtime: " + e.Message, null, e);
            }
            StartedRuntime started = new StartedRuntime
            {
                Endpoint = new RuntimeEndpoint(launch.Host, launch.ConnectPort, launch.GrpcPort, launch.ModelPort, token, spawned.Id),
                Process = spawned,
                StartedAtUtc = DateTime.UtcNow,
            };
            try
            {
                // Recorded at once: a launcher that lets go while the model loads leaves a runtime the next one finds.
                Record(launch, started, exe, true);
                WaitReady(started, exe, cancel);
                Record(launch, started, exe, false);
                return started;
            }
            catch (Exception e)
            {
                if (lettingGo() && cancel.IsCancellationRequested)
                {
                    spawned.Dispose();  // not stopped: it is recorded and keeps starting for the next launcher
                    throw Detached();
                }
                RuntimeStopper.Stop(spawned.Id, spawned, options.StopTimeout, started.Endpoint.ConnectBaseUrl, token);
                RuntimeStateFile.Delete(StateFilePath, spawned.Id);
                spawned.Dispose();
                if (e is RuntimeLaunchException) throw;
                if (e is IOException || e is UnauthorizedAccessException)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.StateFileFailed,
                        "cannot record the CoreAI runtime in " + Path.GetFileName(StateFilePath) + " (" + e.GetType().Name
                        + "); it was stopped so that it does not keep its ports", null, e);
                throw;
            }
        }

        /// <summary>A runtime fetched while the old one ran waits beside its folder: it takes the folder's place now.</summary>
        private string SwitchToFetched(string exe)
        {
            string folder = Path.GetDirectoryName(exe);
            try
            {
                if (RuntimeInstall.PromotePending(folder))
                    raise(RuntimeLauncherEventKind.Updated, "the runtime fetched while the previous one ran replaced it (" + RuntimeInstall.RecordedVersion(folder) + ")");
            }
            catch (IOException e)
            {
                raise(RuntimeLauncherEventKind.Updated, "the fetched runtime still waits beside the running one's folder: " + e.Message);
            }
            return exe;
        }

        private Dictionary<string, string> Environment(string token)
        {
            Dictionary<string, string> env = new Dictionary<string, string>();
            env["PYTHONUNBUFFERED"] = "1";  // log lines reach the file as they happen
            if (options.Environment != null)
            {
                foreach (KeyValuePair<string, string> pair in options.Environment) env[pair.Key] = pair.Value;
            }
            env[RuntimeLauncher.TokenEnvironmentVariable] = token;
            if (!string.IsNullOrEmpty(options.LlmApiKey)) env[RuntimeLauncher.LlmApiKeyEnvironmentVariable] = options.LlmApiKey;
            return env;
        }

        private void Record(RuntimeLaunchOptions launch, StartedRuntime started, string exe, bool starting)
        {
            RuntimeStateFile.Write(StateFilePath, new RuntimeState
            {
                ProcessId = started.Endpoint.ProcessId,
                Host = launch.Host,
                ConnectPort = launch.ConnectPort,
                GrpcPort = launch.GrpcPort,
                ModelPort = launch.ModelPort,
                Token = started.Endpoint.Token,
                ProjectId = options.ProjectId ?? "",
                Fingerprint = options.Fingerprint(),
                StartedAtUtc = started.StartedAtUtc,
                Starting = starting,
                SpawnedBy = ProcessSpawner.Current.CurrentProcessId,
                RuntimePath = exe,
            });
        }

        private void WaitReady(StartedRuntime started, string exe, CancellationToken cancel)
        {
            DateTime deadline = DateTime.UtcNow + options.StartTimeout;
            string url = started.Endpoint.ConnectBaseUrl;
            while (true)
            {
                if (cancel.IsCancellationRequested) throw Stopped();
                if (started.Process.HasExited)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.ExitedDuringStart,
                        "the CoreAI runtime '" + exe + "' exited with code " + started.Process.ExitCode + " while starting",
                        LogTail.Read(options.LogFilePath, LogTailLines));
                if (HealthProbe.Check(url, options.HealthRequestTimeout, cancel) != null) return;
                if (DateTime.UtcNow > deadline)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.StartTimeout,
                        "the CoreAI runtime did not answer " + url + "/healthz within " + options.StartTimeout.TotalSeconds + " s",
                        LogTail.Read(options.LogFilePath, LogTailLines));
                if (cancel.WaitHandle.WaitOne(Poll)) throw Stopped();
            }
        }

        private void RotateLog()
        {
            try
            {
                string previous = options.LogFilePath + ".1";
                if (File.Exists(previous)) File.Delete(previous);
                if (File.Exists(options.LogFilePath)) File.Move(options.LogFilePath, previous);
            }
            catch (IOException)
            {
                // A log still held open (Windows) is appended to instead.
            }
        }
    }
}
