using System;
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
    /// Application.persistentDataPath as its data dir, and stops it when the application quits; in remote mode it connects
    /// to a runtime on a server instead. Launcher events and results reach the main thread through <see cref="MainThread"/>,
    /// drained in Update. Add it to a GameObject in the first scene and assign a <see cref="CoreAIRuntimeSettings"/> asset.
    /// It runs before the game's own scripts (DefaultExecutionOrder), so their Awake and OnEnable find
    /// <see cref="Instance"/> and can call StartRuntime.
    /// </summary>
    [DisallowMultipleComponent]
    [DefaultExecutionOrder(ExecutionOrder)]
    [AddComponentMenu("CoreAI/CoreAI Runtime Bootstrap")]
    public sealed class CoreAIRuntimeBootstrap : MonoBehaviour
    {
        /// <summary>The bootstrap's DefaultExecutionOrder: before the game's scripts (0).</summary>
        public const int ExecutionOrder = -1000;

        [Tooltip("Program, model, ports, persistence and caps of the runtime.")]
        [SerializeField] private CoreAIRuntimeSettings settings;

        [Tooltip("Start the runtime when this component is enabled in Play Mode or a player.")]
        [SerializeField] private bool startOnEnable = true;

        [Tooltip("Keep this GameObject (and the runtime) across scene loads.")]
        [SerializeField] private bool keepAcrossScenes = true;

        [Tooltip("Editor only: stop the runtime when Play Mode ends. Off (default): it stays for the next Play and the Memory Inspector, and ends with the editor.")]
        [SerializeField] private bool stopWithPlayMode;

        private readonly MainThreadQueue mainThread = new MainThreadQueue();
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
        private LocalRuntime local;  // this game starts its own runtime (desktop editors and players)
#endif
        private RemoteRuntime remote; // remote mode: the runtime at CoreAIRuntimeSettings.RemoteUrl
        private RuntimeEndpoint remoteEndpoint;
        private Task<RuntimeEndpoint> unsupported; // this platform can neither launch nor has a URL: failed once, reported once
        private Task<RuntimeEndpoint> starting;
        private AgentMemoryScope defaultScope;  // a Multiplayer Play Mode virtual player's own scope (read on the main thread)
        private bool quitting;

        /// <summary>The active bootstrap, or null.</summary>
        public static CoreAIRuntimeBootstrap Instance { get; private set; }

        /// <summary>Raised on the main thread when the runtime answers health (after a start, reuse or restart).</summary>
        public event Action<RuntimeEndpoint> RuntimeReady;

        /// <summary>Raised on the main thread when the runtime could not be started; the argument says why.</summary>
        public event Action<Exception> RuntimeFailed;

#pragma warning disable 67  // never raised where nothing is downloaded (no CoreAI.Hosting: mobile, WebGL, consoles)
        /// <summary>Raised on the main thread while a player downloads its model on first launch (CoreAIRuntimeSettings).</summary>
        public event Action<DownloadProgress> ModelDownloadProgress;
#pragma warning restore 67

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
            get
            {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
                if (local != null) return local.Endpoint;
#endif
                return remoteEndpoint;
            }
        }

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
        /// <summary>The launcher (null before StartRuntime, in remote mode, and while a first-launch download runs). Desktop only.</summary>
        public RuntimeLauncher Launcher
        {
            get { return local == null ? null : local.Launcher; }
        }
#endif

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
        /// has no Remote URL it fails once, naming the platform and both options (the build step refuses to build such a
        /// player in the first place). Awaiting it from a MonoBehaviour resumes on the main thread.
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
            defaultScope = settings.SeparateVirtualPlayerMemory ? ProjectPaths.VirtualPlayerScope(ProjectPaths.VirtualPlayerId()) : null;
            if (!RuntimePlatforms.CanReachARuntime(platform)) return Unsupported(platform);
            if (settings.UsesRemoteRuntime) return StartRemote();
            if (!RuntimePlatforms.CanStartProcesses(platform)) return Unsupported(platform);
            return StartLocal(platform);
        }

        /// <summary>Cancels the model download of a player's first launch: nothing of it is kept, and RuntimeFailed says so.</summary>
        public void CancelModelDownload()
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            if (local != null) local.CancelDownload();
#endif
        }

        /// <summary>A client of the ready runtime (the caller disposes it); policy null uses AgentMemoryPolicy.Default.</summary>
        /// <exception cref="InvalidOperationException">The runtime is not ready yet (wait for RuntimeReady).</exception>
        public CoreAIRuntimeClient CreateClient(AgentMemoryPolicy policy = null)
        {
            RuntimeEndpoint endpoint = Endpoint;
            if (endpoint == null) throw new InvalidOperationException("the CoreAI runtime is not ready yet; wait for RuntimeReady");
            // The play session: Unity's main thread for main-thread tools, a lifetime that ends with Play Mode, and a
            // virtual player's own memory scope.
            GameHost host = CoreAIPlaySession.Host();
            host.DefaultScope = defaultScope;
            if (remote != null) return remote.CreateClient(policy, host);
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            // The token is read per call: after a restart (new token) the same client carries on by itself.
            return local.Launcher.CreateClient(policy, host);
#else
            throw new InvalidOperationException("the CoreAI runtime is not ready yet; wait for RuntimeReady");
#endif
        }

        /// <summary>
        /// Stops the runtime now (it is also stopped when the application quits). The main thread waits only briefly
        /// (Quit Timeout): a runtime that has not stopped by then is killed, and the rest finishes off the main thread.
        /// </summary>
        public void StopRuntime()
        {
            ForgetRemote(); // remote mode: the server's runtime is not ours to stop
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            if (local == null) return;
            local.Stop();
            local = null;
            starting = null;
#endif
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
            if (!quitting) LetGo();
        }

        private void OnApplicationQuit()
        {
            quitting = true;
            // Session Only keeps memory and chats in the runtime for one play session: a kept runtime would carry them into the next Play.
            bool sessionOnly = settings != null && settings.PersistenceMode == AgentMemoryPersistenceMode.SessionOnly;
            // A Multiplayer Play Mode virtual player shares the main editor's runtime: only the main editor stops it.
            bool sharedByVirtualPlayer = ProjectPaths.VirtualPlayerId() != null;
            if (Application.isEditor && (sharedByVirtualPlayer || (!stopWithPlayMode && !sessionOnly)))
            {
                // Leaving Play Mode is not quitting the editor: keep the runtime (and its loaded model) for the next
                // Play and for the Memory Inspector; the next launcher reuses it when the settings digest matches,
                // and --parent-pid still ends it with the editor.
                LetGo();
                return;
            }
            StopRuntime();
        }

        private void OnDestroy()
        {
            if (Instance == this) Instance = null;
        }

        private void LetGo()
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            if (local != null)
            {
                local.Detach();
                local = null;
                starting = null;
            }
#endif
            ForgetRemote();
        }

        private Task<RuntimeEndpoint> StartLocal(string platform)
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            RuntimeLaunchOptions options;
            try
            {
                options = settings.ToLaunchOptions(Application.persistentDataPath, ProjectPaths.Root(), ProjectIdentity.Current());
            }
            catch (RuntimeLaunchException e)
            {
                return Failed(e);
            }
            // A player runs the runtime (and model) its build carries, copied there by the editor's RuntimeBuildStep.
            if (!Application.isEditor) BundledRuntime.UseBundled(options, Application.streamingAssetsPath);
            // The editor's runtime outlives Play Mode: its own state folder and ports keep a built player of the game free.
            else options.UseEditorInstance();
            if (local != null) local.Detach();
            ForgetRemote();
            LocalRuntime started = new LocalRuntime(mainThread, OnLauncherEvent);
            local = started;
            bool download = FirstLaunchModel.IsNeeded(settings, Application.isEditor);
            starting = started.Start(options, settings, download, Application.persistentDataPath,
                p => { if (ModelDownloadProgress != null) ModelDownloadProgress(p); });
            starting.ContinueWith(t => mainThread.Post(() => OnStartFinished(started, t)));
            return starting;
#else
            return Unsupported(platform);
#endif
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
                return Failed(e);
            }
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
            if (local != null) local.Detach();
            local = null;
#endif
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

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
        private void OnStartFinished(LocalRuntime started, Task<RuntimeEndpoint> task)
        {
            if (task.IsFaulted)
            {
                Exception error = task.Exception.GetBaseException();
                DownloadException download = error as DownloadException;
                if (download != null && download.Kind == DownloadFailure.Paused) return;  // the game quit mid-download
                CoreAILog.Exception(download != null ? "the model could not be downloaded" : "the runtime could not be started", error);
                if (RuntimeFailed != null) RuntimeFailed(error);
                return;
            }
            if (task.IsCanceled || started != local) return;
            RuntimeEndpoint endpoint = task.Result; // completed: no blocking
            CoreAILog.Info((started.Launcher.Reused ? "reusing the runtime" : "runtime started") + " on port " + endpoint.ConnectPort
                + " (pid " + endpoint.ProcessId + ")");
            if (RuntimeReady != null) RuntimeReady(endpoint);
        }
#endif

        private void OnLauncherEvent(RuntimeLauncherEvent e)
        {
            CoreAILog.LauncherEvent(e);
            if (e.Kind == RuntimeLauncherEventKind.Restarted && RuntimeReady != null && Endpoint != null) RuntimeReady(Endpoint);
            if (RuntimeEvent != null) RuntimeEvent(e);
        }
    }
}
