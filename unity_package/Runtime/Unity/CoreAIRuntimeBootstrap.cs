using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Downloads;
using CoreAI.Launcher;
using CoreAI.Runtime;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// Starts the CoreAI runtime for the game (or reuses the one this project already runs), with
    /// Application.persistentDataPath as its data dir, and stops it when the application quits.
    /// Launcher events and results reach the main thread through <see cref="MainThread"/>, drained in Update.
    /// Add it to a GameObject in the first scene and assign a <see cref="CoreAIRuntimeSettings"/> asset.
    /// </summary>
    [DisallowMultipleComponent]
    [AddComponentMenu("CoreAI/CoreAI Runtime Bootstrap")]
    public sealed class CoreAIRuntimeBootstrap : MonoBehaviour
    {
        [Tooltip("Program, model, ports, persistence and caps of the runtime.")]
        [SerializeField] private CoreAIRuntimeSettings settings;

        [Tooltip("Start the runtime when this component is enabled in Play Mode or a player.")]
        [SerializeField] private bool startOnEnable = true;

        [Tooltip("Keep this GameObject (and the runtime) across scene loads.")]
        [SerializeField] private bool keepAcrossScenes = true;

        [Tooltip("Editor only: stop the runtime when Play Mode ends. Off (default): it stays for the next Play and the Memory Inspector, and ends with the editor.")]
        [SerializeField] private bool stopWithPlayMode;

        private readonly MainThreadQueue mainThread = new MainThreadQueue();
        private RuntimeLauncher launcher;
        private RemoteRuntime remote; // remote mode: the runtime at CoreAIRuntimeSettings.RemoteUrl
        private RuntimeEndpoint remoteEndpoint;
        private Task<RuntimeEndpoint> unsupported; // this platform can neither launch nor has a URL: failed once, reported once
        private Task<RuntimeEndpoint> starting;
        private bool quitting;

        /// <summary>The active bootstrap, or null.</summary>
        public static CoreAIRuntimeBootstrap Instance { get; private set; }

        /// <summary>Raised on the main thread when the runtime answers health (after a start, reuse or restart).</summary>
        public event Action<RuntimeEndpoint> RuntimeReady;

        /// <summary>Raised on the main thread when the runtime could not be started; the argument says why.</summary>
        public event Action<Exception> RuntimeFailed;

        /// <summary>Raised on the main thread while a player downloads its model on first launch (CoreAIRuntimeSettings).</summary>
        public event Action<DownloadProgress> ModelDownloadProgress;

        /// <summary>Raised on the main thread for every launcher event (exited, restarting, restarted …).</summary>
        public event Action<RuntimeLauncherEvent> RuntimeEvent;

        /// <summary>The settings in use.</summary>
        public CoreAIRuntimeSettings Settings
        {
            get { return settings; }
            set { settings = value; }
        }

        /// <summary>Actions to run on the main thread (drained every Update).</summary>
        public MainThreadQueue MainThread
        {
            get { return mainThread; }
        }

        /// <summary>Where the runtime answers; null until it is ready.</summary>
        public RuntimeEndpoint Endpoint
        {
            get { return launcher != null ? launcher.Endpoint : remoteEndpoint; }
        }

        /// <summary>The launcher (null before StartRuntime).</summary>
        public RuntimeLauncher Launcher
        {
            get { return launcher; }
        }

        /// <summary>True once the runtime answers health.</summary>
        public bool IsReady
        {
            get { return Endpoint != null; }
        }

        /// <summary>The remote runtime in remote mode (null when this game starts its own).</summary>
        public RemoteRuntime Remote
        {
            get { return remote; }
        }

        /// <summary>
        /// Starts the runtime (idempotent), or in remote mode (a Remote URL in the settings) connects to it; completes
        /// with its endpoint, or faults with a RuntimeLaunchException. On a platform that cannot start processes and
        /// has no Remote URL it fails once, naming the platform and both options. Awaiting it from a MonoBehaviour
        /// resumes on the main thread.
        /// </summary>
        public Task<RuntimeEndpoint> StartRuntime()
        {
            if (starting != null && !(starting.IsFaulted || starting.IsCanceled)) return starting;
            if (settings == null)
            {
                InvalidOperationException missing = new InvalidOperationException("CoreAIRuntimeBootstrap has no CoreAIRuntimeSettings assigned");
                CoreAILog.Error(missing.Message);
                starting = Task.FromException<RuntimeEndpoint>(missing);
                return starting;
            }
            string platform = Application.platform.ToString();
            if (!RuntimePlatforms.CanReachARuntime(platform)) return Unsupported(platform);
            if (settings.UsesRemoteRuntime) return StartRemote();
            if (!RuntimePlatforms.CanStartProcesses(platform)) return Unsupported(platform);
            string projectRoot = Directory.GetParent(Application.dataPath) == null ? "" : Directory.GetParent(Application.dataPath).FullName;
            RuntimeLaunchOptions options;
            try
            {
                options = settings.ToLaunchOptions(Application.persistentDataPath, projectRoot, ProjectIdentity.Current());
            }
            catch (RuntimeLaunchException e)
            {
                return Failed(e);
            }
            // A player runs the runtime (and model) its build carries, copied there by the editor's RuntimeBuildStep.
            if (!Application.isEditor) BundledRuntime.UseBundled(options, Application.streamingAssetsPath);
            // The editor's runtime outlives Play Mode: its own state folder and ports keep a built player of the game free.
            else options.UseEditorInstance();
            if (FirstLaunchModel.IsNeeded(settings, Application.isEditor)) return StartAfterModelDownload(options);
            return Launch(options);
        }

        private Task<RuntimeEndpoint> Launch(RuntimeLaunchOptions options)
        {
            if (launcher != null) launcher.Detach();
            ForgetRemote();
            launcher = new RuntimeLauncher(options);
            launcher.EventRaised += e => mainThread.Post(() => OnLauncherEvent(e));
            RuntimeLauncher started = launcher;
            starting = started.StartAsync();
            starting.ContinueWith(t => mainThread.Post(() => OnStartFinished(started, t)));
            return starting;
        }

        // First launch of a player that does not bundle its model: download it (progress on the main thread), then launch.
        private Task<RuntimeEndpoint> StartAfterModelDownload(RuntimeLaunchOptions options)
        {
            TaskCompletionSource<RuntimeEndpoint> done = new TaskCompletionSource<RuntimeEndpoint>();
            starting = done.Task;
            FirstLaunchModel.DownloadAsync(settings, Application.persistentDataPath, mainThread,
                    p => { if (ModelDownloadProgress != null) ModelDownloadProgress(p); }, CancellationToken.None)
                .ContinueWith(download => mainThread.Post(() =>
                {
                    if (download.IsFaulted || download.IsCanceled)
                    {
                        Exception error = download.IsFaulted ? download.Exception.GetBaseException() : new OperationCanceledException("the model download was cancelled");
                        CoreAILog.Exception("the model could not be downloaded", error);
                        if (RuntimeFailed != null) RuntimeFailed(error);
                        done.TrySetException(error);
                        return;
                    }
                    CoreAILog.Info("model " + settings.ModelName + " is ready in persistentDataPath/CoreAI/models");
                    options.ModelPath = download.Result;
                    Launch(options).ContinueWith(t =>
                    {
                        if (t.IsFaulted) done.TrySetException(t.Exception.InnerExceptions);
                        else if (t.IsCanceled) done.TrySetCanceled();
                        else done.TrySetResult(t.Result);
                    });
                }));
            return done.Task;
        }

        /// <summary>A client of the ready runtime (the caller disposes it); policy null uses AgentMemoryPolicy.Default.</summary>
        /// <exception cref="InvalidOperationException">The runtime is not ready yet (wait for RuntimeReady).</exception>
        public CoreAIRuntimeClient CreateClient(AgentMemoryPolicy policy = null)
        {
            RuntimeEndpoint endpoint = Endpoint;
            if (endpoint == null) throw new InvalidOperationException("the CoreAI runtime is not ready yet; wait for RuntimeReady");
            // The play session: Unity's main thread for main-thread tools, and a lifetime that ends with Play Mode.
            GameHost host = CoreAIPlaySession.Host();
            if (remote != null) return remote.CreateClient(policy, host);
            // The token is read per call: after a restart (new token) the same client carries on by itself.
            return launcher.CreateClient(policy, host);
        }

        /// <summary>Stops the runtime now (it is also stopped when the application quits).</summary>
        public void StopRuntime()
        {
            ForgetRemote(); // remote mode: the server's runtime is not ours to stop
            if (launcher == null) return;
            launcher.Stop();
            launcher = null;
            starting = null;
        }

        private void Awake()
        {
            if (Instance != null && Instance != this)
            {
                // Only this component: what else is on its GameObject belongs to the game.
                CoreAILog.Warning("a second CoreAIRuntimeBootstrap was removed (its GameObject stays); one per game is enough");
                Destroy(this);
                return;
            }
            Instance = this;
            CoreAIPlaySession.Begin();  // captures Unity's main thread for the clients this hands out
            if (keepAcrossScenes)
            {
                // DontDestroyOnLoad works on root objects only: keep the root this bootstrap sits under.
                GameObject root = transform.root.gameObject;
                if (root != gameObject)
                    CoreAILog.Info("Keep Across Scenes keeps the bootstrap's root GameObject (and everything under it) across scene loads");
                DontDestroyOnLoad(root);
            }
        }

        private void OnEnable()
        {
            // Also runs after an editor domain reload in Play Mode (Awake does not): the launcher then reuses the
            // runtime, and the play session (dropped with the static state) begins again on this main thread.
            if (Instance == null) Instance = this;
            if (Application.isPlaying && Instance == this) CoreAIPlaySession.Begin();
            if (startOnEnable && Application.isPlaying && Instance == this) StartRuntime();
        }

        private void Update()
        {
            mainThread.Drain(64, e => CoreAILog.Exception("a main-thread callback failed", e));
        }

        private void OnDisable()
        {
            // Disabled or about to be reloaded: let go without stopping, so a reload reuses the runtime.
            if (!quitting && launcher != null)
            {
                launcher.Detach();
                launcher = null;
                starting = null;
            }
            if (!quitting && remote != null) ForgetRemote();
        }

        private void OnApplicationQuit()
        {
            quitting = true;
            // Session Only keeps memory and chats in the runtime for one play session: a kept runtime would carry them into the next Play.
            bool sessionOnly = settings != null && settings.PersistenceMode == AgentMemoryPersistenceMode.SessionOnly;
            if (Application.isEditor && !stopWithPlayMode && !sessionOnly)
            {
                // Leaving Play Mode is not quitting the editor: keep the runtime (and its loaded model) for the next
                // Play and for the Memory Inspector; the next launcher reuses it when the settings digest matches,
                // and --parent-pid still ends it with the editor.
                if (launcher != null) launcher.Detach();
                launcher = null;
                starting = null;
                ForgetRemote();
                return;
            }
            StopRuntime();
        }

        private void OnDestroy()
        {
            if (Instance == this) Instance = null;
        }

        private Task<RuntimeEndpoint> Unsupported(string platform)
        {
            if (unsupported == null)
            {
                RuntimeLaunchException error = new RuntimeLaunchException(RuntimeLaunchFailure.PlatformUnsupported,
                    RuntimePlatforms.UnsupportedMessage(platform));
                CoreAILog.Error(error.Message);
                unsupported = Task.FromException<RuntimeEndpoint>(error);
                mainThread.Post(() => { if (RuntimeFailed != null) RuntimeFailed(error); });
            }
            return unsupported;
        }

        private Task<RuntimeEndpoint> Failed(RuntimeLaunchException error)
        {
            CoreAILog.Error(error.Message);
            starting = Task.FromException<RuntimeEndpoint>(error);
            mainThread.Post(() => { if (RuntimeFailed != null) RuntimeFailed(error); });
            return starting;
        }

        private Task<RuntimeEndpoint> StartRemote()
        {
            RemoteRuntime connecting;
            try
            {
                connecting = new RemoteRuntime(settings.ToRemoteOptions());
            }
            catch (RuntimeLaunchException e)
            {
                CoreAILog.Error(e.Message);
                mainThread.Post(() => { if (RuntimeFailed != null) RuntimeFailed(e); });
                starting = Task.FromException<RuntimeEndpoint>(e);
                return starting;
            }
            if (launcher != null) launcher.Detach();
            launcher = null;
            remote = connecting;
            remoteEndpoint = null;
            starting = Task.Run(() =>
            {
                RuntimeEndpoint connected = connecting.Connect();
                if (remote == connecting) remoteEndpoint = connected; // usable as soon as the task completes
                return connected;
            });
            starting.ContinueWith(t => mainThread.Post(() => OnRemoteFinished(connecting, t)));
            return starting;
        }

        private void ForgetRemote()
        {
            if (remote == null) return;
            remote = null;
            remoteEndpoint = null;
            starting = null;
        }

        private void OnRemoteFinished(RemoteRuntime connected, Task<RuntimeEndpoint> task)
        {
            if (task.IsFaulted)
            {
                Exception error = task.Exception.GetBaseException();
                CoreAILog.Exception("the remote runtime could not be reached", error);
                if (RuntimeFailed != null) RuntimeFailed(error);
                return;
            }
            if (task.IsCanceled || connected != remote) return;
            CoreAILog.Info("connected to the remote runtime");
            if (RuntimeReady != null) RuntimeReady(task.Result);
        }

        private void OnStartFinished(RuntimeLauncher started, Task<RuntimeEndpoint> task)
        {
            if (task.IsFaulted)
            {
                Exception error = task.Exception.GetBaseException();
                CoreAILog.Exception("the runtime could not be started", error);
                if (RuntimeFailed != null) RuntimeFailed(error);
                return;
            }
            if (task.IsCanceled || started != launcher) return;
            RuntimeEndpoint endpoint = task.Result; // completed: no blocking
            CoreAILog.Info((started.Reused ? "reusing the runtime" : "runtime started") + " on port " + endpoint.ConnectPort + " (pid " + endpoint.ProcessId + ")");
            if (RuntimeReady != null) RuntimeReady(endpoint);
        }

        private void OnLauncherEvent(RuntimeLauncherEvent e)
        {
            switch (e.Kind)
            {
                case RuntimeLauncherEventKind.Exited:
                    CoreAILog.Warning("the runtime (pid " + e.ProcessId + ") exited unexpectedly" + (e.Message.Length > 0 ? " (" + e.Message + ")" : ""));
                    break;
                case RuntimeLauncherEventKind.Restarting:
                    CoreAILog.Info("restarting the runtime in " + e.Delay.TotalSeconds.ToString("0.#") + " s (attempt " + e.Attempt + ")");
                    break;
                case RuntimeLauncherEventKind.RestartFailed:
                    CoreAILog.Warning("restart attempt " + e.Attempt + " failed: " + e.Message);
                    break;
                case RuntimeLauncherEventKind.GaveUp:
                    CoreAILog.Error("the runtime keeps failing; stopped restarting it: " + e.Message);
                    break;
                case RuntimeLauncherEventKind.PortsChosen:
                    CoreAILog.Warning(e.Message);
                    break;
                case RuntimeLauncherEventKind.Restarted:
                    CoreAILog.Info("runtime restarted (pid " + e.ProcessId + ")");
                    if (RuntimeReady != null && launcher != null && launcher.Endpoint != null) RuntimeReady(launcher.Endpoint);
                    break;
            }
            if (RuntimeEvent != null) RuntimeEvent(e);
        }
    }
}
