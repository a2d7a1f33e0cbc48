using System;
using System.Collections.Generic;
using System.IO;
using System.Text;
using CoreAI.Downloads;
using CoreAI.Runtime;

namespace CoreAI.Launcher
{
    /// <summary>How to start `coreai-runtime serve` and how to look after it.</summary>
    public sealed class RuntimeLaunchOptions
    {
        /// <summary>Default port of the Connect (HTTP/1.1 + JSON) API, which also answers GET /healthz.</summary>
        public const int DefaultConnectPort = RuntimeEndpoint.DefaultConnectPort;

        /// <summary>Default port of the gRPC API.</summary>
        public const int DefaultGrpcPort = RuntimeEndpoint.DefaultGrpcPort;

        /// <summary>Default port of the hosted model's OpenAI-compatible server.</summary>
        public const int DefaultModelPort = RuntimeEndpoint.DefaultModelPort;

        /// <summary>
        /// The program to run: `coreai-runtime` of a Python environment, that environment's `python`
        /// (with <see cref="RuntimeArguments"/> = `-m pyruntime.cli`), or a bundled executable. A bare
        /// name is looked up on PATH.
        /// </summary>
        public string RuntimePath { get; set; } = "coreai-runtime";

        /// <summary>Arguments put before `serve` (e.g. `-m`, `pyruntime.cli` when RuntimePath is python).</summary>
        public IList<string> RuntimeArguments { get; set; } = new List<string>();

        /// <summary>The game's persistentDataPath: saves live under `CoreAI/`, the launcher's state under `CoreAI/Runtime/`.</summary>
        public string DataDir { get; set; }

        /// <summary>GGUF model file to host; null hosts the runtime's embedded model.</summary>
        public string ModelPath { get; set; }

        /// <summary>Use this OpenAI-compatible server instead of hosting a model (exclusive with ModelPath).</summary>
        public string LlmUrl { get; set; }

        /// <summary>Listen address of the runtime (loopback: the runtime is for this machine only).</summary>
        public string Host { get; set; } = "127.0.0.1";

        /// <summary>Port of the Connect API (health, memory store, orchestrator).</summary>
        public int ConnectPort { get; set; } = DefaultConnectPort;

        /// <summary>Port of the gRPC API.</summary>
        public int GrpcPort { get; set; } = DefaultGrpcPort;

        /// <summary>Port of the hosted model's server.</summary>
        public int ModelPort { get; set; } = DefaultModelPort;

        /// <summary>Context size of the hosted model; 0 keeps the runtime's default.</summary>
        public int ContextTokens { get; set; }

        /// <summary>The token clients present; null or empty makes the launcher generate one.</summary>
        public string Token { get; set; }

        /// <summary>Identifies the project, so a runtime started by another project is never reused.</summary>
        public string ProjectId { get; set; } = "";

        /// <summary>More `serve` arguments, appended as they are (e.g. persistence mode and caps).</summary>
        public IList<string> ExtraServeArguments { get; set; } = new List<string>();

        /// <summary>Environment variables set for the runtime (besides the token).</summary>
        public IDictionary<string, string> Environment { get; set; } = new Dictionary<string, string>();

        /// <summary>Working directory of the runtime; null: the data dir.</summary>
        public string WorkingDirectory { get; set; }

        /// <summary>How long a start may take until the runtime answers health.</summary>
        public TimeSpan StartTimeout { get; set; } = TimeSpan.FromSeconds(120);

        /// <summary>How long one health request may take.</summary>
        public TimeSpan HealthRequestTimeout { get; set; } = TimeSpan.FromSeconds(2);

        /// <summary>How often the watchdog checks that the runtime still runs.</summary>
        public TimeSpan WatchInterval { get; set; } = TimeSpan.FromSeconds(1);

        /// <summary>Restart the runtime when it dies.</summary>
        public bool RestartOnExit { get; set; } = true;

        /// <summary>Delay before the first restart; doubled after each failed attempt.</summary>
        public TimeSpan RestartBackoffInitial { get; set; } = TimeSpan.FromSeconds(1);

        /// <summary>Longest delay between restart attempts.</summary>
        public TimeSpan RestartBackoffMax { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>Consecutive failed restarts after which the launcher gives up (0 = never).</summary>
        public int MaxRestartAttempts { get; set; } = 10;

        /// <summary>A runtime up this long is stable: the backoff starts over at its next death.</summary>
        public TimeSpan StableUptime { get; set; } = TimeSpan.FromSeconds(60);

        /// <summary>How long a graceful stop may take before the runtime is killed.</summary>
        public TimeSpan StopTimeout { get; set; } = TimeSpan.FromSeconds(10);

        /// <summary>
        /// How long quitting the game may wait for the graceful stop (<see cref="RuntimeLauncher.StopWithin"/>) before the
        /// runtime is killed, so the last frame is not held up.
        /// </summary>
        public TimeSpan QuitTimeout { get; set; } = TimeSpan.FromSeconds(3);

        /// <summary>
        /// Reuse a running runtime of this project even when it was started with other settings, instead of replacing it:
        /// for tools that only read and must never take a play session's runtime away (the Memory Inspector).
        /// </summary>
        public bool ReuseAnySettings { get; set; }

        /// <summary>
        /// The process the runtime lives and dies with (`serve --parent-pid`): this process (the game or the editor)
        /// unless set. The runtime stops itself and its model within about a second after it dies, however it died.
        /// Not part of the settings digest: a second editor of the same project reuses the runtime instead of
        /// replacing it.
        /// </summary>
        public int ParentProcessId
        {
            get { return parentProcessId > 0 ? parentProcessId : ProcessSpawner.Current.CurrentProcessId; }
            set { parentProcessId = value; }
        }

        private int parentProcessId;

        /// <summary>
        /// When a configured port is taken by another program (another game, a second editor's runtime of another
        /// project): start on ports chosen for this project instead (stable per project id and instance, 20000-31999),
        /// reported by a PortsChosen event. False: fail with PortInUse.
        /// </summary>
        public bool ChoosePortsWhenTaken { get; set; } = true;

        /// <summary>
        /// The API key of the external server at LlmUrl, for this launch only: passed to the runtime in its environment
        /// (`COREAI_LLM_API_KEY`), never on the command line, in the state file, the settings digest or a log line.
        /// </summary>
        public string LlmApiKey { get; set; }

        /// <summary>Options for a Python environment: `python -m pyruntime.cli serve`.</summary>
        public static RuntimeLaunchOptions ForPython(string pythonPath, string dataDir)
        {
            RuntimeLaunchOptions options = new RuntimeLaunchOptions();
            options.RuntimePath = pythonPath;
            options.RuntimeArguments = new List<string> { "-m", "pyruntime.cli" };
            options.DataDir = dataDir;
            return options;
        }

        /// <summary>Throws ArgumentException naming the first invalid option.</summary>
        public void Validate()
        {
            if (string.IsNullOrWhiteSpace(RuntimePath))
                throw new ArgumentException("RuntimePath is required (coreai-runtime, python or a bundled executable)");
            if (string.IsNullOrWhiteSpace(DataDir))
                throw new ArgumentException("DataDir is required (the game's persistentDataPath)");
            if (!Path.IsPathRooted(DataDir))
                throw new ArgumentException("DataDir must be an absolute path");
            if (string.IsNullOrWhiteSpace(Host))
                throw new ArgumentException("Host is required");
            CheckPort("ConnectPort", ConnectPort);
            CheckPort("GrpcPort", GrpcPort);
            CheckPort("ModelPort", ModelPort);
            if (ConnectPort == ModelPort || ConnectPort == GrpcPort || GrpcPort == ModelPort)
                throw new ArgumentException("ConnectPort, GrpcPort and ModelPort must all differ");
            if (!string.IsNullOrEmpty(ModelPath) && !string.IsNullOrEmpty(LlmUrl))
                throw new ArgumentException("set ModelPath or LlmUrl, not both");
            if (ContextTokens < 0)
                throw new ArgumentException("ContextTokens must be 0 (runtime default) or positive, got " + ContextTokens);
            if (StartTimeout <= TimeSpan.Zero)
                throw new ArgumentException("StartTimeout must be positive");
            if (WatchInterval <= TimeSpan.Zero)
                throw new ArgumentException("WatchInterval must be positive");
            if (RestartBackoffInitial < TimeSpan.Zero || RestartBackoffMax < RestartBackoffInitial)
                throw new ArgumentException("need 0 <= RestartBackoffInitial <= RestartBackoffMax");
            if (MaxRestartAttempts < 0)
                throw new ArgumentException("MaxRestartAttempts must be 0 (never give up) or positive");
        }

        private static void CheckPort(string name, int port)
        {
            if (port < 1 || port > 65535)
                throw new ArgumentException(name + " must be within 1..65535, got " + port);
        }

        /// <summary>How far the editor's runtime moves from the configured ports (see <see cref="UseEditorInstance"/>).</summary>
        public const int EditorPortOffset = 100;

        /// <summary>The editor instance's folder name under `CoreAI/runtime`.</summary>
        public const string EditorInstance = "editor";

        /// <summary>"" for a game's runtime; <see cref="EditorInstance"/> for the editor's (its own state file and ports).</summary>
        public string Instance { get; set; } = "";

        /// <summary>
        /// Make these the editor's options: its own state folder (`CoreAI/runtime/editor`) and every port moved up by
        /// <see cref="EditorPortOffset"/>, so an editor runtime (kept across Play/Stop) and a built player of the same
        /// game, which share persistentDataPath, never find each other's ports taken or state file foreign.
        /// </summary>
        public RuntimeLaunchOptions UseEditorInstance()
        {
            if (Instance == EditorInstance) return this;
            Instance = EditorInstance;
            ConnectPort += EditorPortOffset;
            GrpcPort += EditorPortOffset;
            ModelPort += EditorPortOffset;
            return this;
        }

        /// <summary>The ports the runtime listens on: Connect, gRPC and (when it hosts the model) the model's.</summary>
        public int[] Ports()
        {
            if (!string.IsNullOrEmpty(LlmUrl)) return new[] { ConnectPort, GrpcPort };
            return new[] { ConnectPort, GrpcPort, ModelPort };
        }

        /// <summary>`&lt;DataDir&gt;/CoreAI/runtime[/&lt;Instance&gt;]`: the launcher's state file and the runtime's log.</summary>
        public string RuntimeFolder
        {
            get
            {
                string folder = RuntimeLauncher.RuntimeFolderOf(DataDir);
                return string.IsNullOrEmpty(Instance) ? folder : Path.Combine(folder, Instance);
            }
        }

        /// <summary>The runtime's log (`serve --log-file`): its output, whatever the OS; the previous run's is `runtime.log.1`.</summary>
        public string LogFilePath
        {
            get { return Path.Combine(RuntimeFolder, "runtime.log"); }
        }

        /// <summary>A copy of these options listening on other ports.</summary>
        public RuntimeLaunchOptions WithPorts(int connectPort, int grpcPort, int modelPort)
        {
            RuntimeLaunchOptions copy = (RuntimeLaunchOptions)MemberwiseClone();
            copy.ConnectPort = connectPort;
            copy.GrpcPort = grpcPort;
            copy.ModelPort = modelPort;
            return copy;
        }

        /// <summary>A `serve --config` JSON file (the one a build step writes next to the bundled runtime); null: none. Flags given here win over it.</summary>
        public string ConfigPath { get; set; }

        /// <summary>The full argument list: RuntimeArguments, `serve` and its flags (the token goes by environment, never here).</summary>
        public IList<string> BuildArguments()
        {
            List<string> args = new List<string>(RuntimeArguments ?? new List<string>());
            args.Add("serve");
            args.Add("--data-dir");
            args.Add(DataDir);
            args.Add("--host");
            args.Add(Host);
            args.Add("--port");
            args.Add(ModelPort.ToString(System.Globalization.CultureInfo.InvariantCulture));
            args.Add("--connect-port");
            args.Add(ConnectPort.ToString(System.Globalization.CultureInfo.InvariantCulture));
            args.Add("--grpc-port");
            args.Add(GrpcPort.ToString(System.Globalization.CultureInfo.InvariantCulture));
            if (!string.IsNullOrEmpty(ModelPath))
            {
                args.Add("--model");
                args.Add(ModelPath);
            }
            if (!string.IsNullOrEmpty(LlmUrl))
            {
                args.Add("--llm-url");
                args.Add(LlmUrl);
            }
            if (ContextTokens > 0)
            {
                args.Add("--ctx");
                args.Add(ContextTokens.ToString(System.Globalization.CultureInfo.InvariantCulture));
            }
            if (!string.IsNullOrEmpty(ConfigPath))
            {
                args.Add("--config");
                args.Add(ConfigPath);
            }
            args.Add("--log-file"); // the runtime writes its own log: no pipe for a reloaded script domain to stop reading
            args.Add(LogFilePath);
            args.Add(ParentProcessFlag); // always: a runtime must never outlive its game
            args.Add(ParentProcessId.ToString(System.Globalization.CultureInfo.InvariantCulture));
            if (ExtraServeArguments != null) args.AddRange(ExtraServeArguments);
            return args;
        }

        private const string ParentProcessFlag = "--parent-pid";

        // Flags whose values say where and for whom a runtime runs, not what it runs: left out of the digest.
        private static readonly string[] Placement = { ParentProcessFlag, "--port", "--connect-port", "--grpc-port" };

        /// <summary>
        /// A digest of what is started (never the token, nor the parent process or the ports): a recorded runtime is
        /// reused only when it matches, so a second editor process of the project (Multiplayer Play Mode, a clone)
        /// shares the runtime, and one started on ports chosen because the configured ones were taken is found again.
        /// The runtime's version is part of it (<see cref="RuntimeInstall.VersionOf"/>): a fetched or rebuilt runtime
        /// replaces the running one at the next start.
        /// </summary>
        public string Fingerprint()
        {
            StringBuilder text = new StringBuilder(RuntimePath);
            text.Append("\nversion ").Append(RuntimeInstall.VersionOf(ExecutableResolver.Resolve(RuntimePath)));
            IList<string> args = BuildArguments();
            for (int i = 0; i < args.Count; i++)
            {
                if (Array.IndexOf(Placement, args[i]) >= 0)
                {
                    i++;  // and its value
                    continue;
                }
                text.Append('\n').Append(args[i]);
            }
            return Digest.Sha256Hex(text.ToString());
        }
    }
}
