using System;
using System.Collections.Generic;
using CoreAI.Ai;
using CoreAI.Launcher;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>How the game starts and reaches the CoreAI runtime: program, model, ports, persistence, caps.</summary>
    [CreateAssetMenu(menuName = "CoreAI/Runtime Settings", fileName = "CoreAIRuntimeSettings")]
    public sealed class CoreAIRuntimeSettings : ScriptableObject
    {
        /// <summary>The runtime's default chat-message cap per key (contract §3.1).</summary>
        public const int DefaultChatHistoryMessageCap = 500;

        /// <summary>The runtime's default transcript-row cap per key (contract §3.1).</summary>
        public const int DefaultTranscriptEntryCap = 2000;

        [Header("Runtime program")]
        [Tooltip("What Runtime Path points at.")]
        [SerializeField] private RuntimeProgram runtimeProgram = RuntimeProgram.CoreAIRuntimeCommand;

        [Tooltip("coreai-runtime (bare name: looked up on PATH), a Python environment's python, or a bundled executable. Relative paths are resolved against the project folder.")]
        [SerializeField] private string runtimePath = "coreai-runtime";

        [Header("Model")]
        [Tooltip("GGUF model file to host. Empty: the runtime's embedded SmolLM2-135M.")]
        [SerializeField] private string modelPath = "";

        [Tooltip("The catalogue model Model Path holds (CoreAI > Models pulls and assigns it), and the one a player downloads on first launch.")]
        [SerializeField] private string modelName = "";

        [Tooltip("Player builds: do not bundle the model; download Model Name on the first launch into persistentDataPath/CoreAI/models (checked against its sha256, resumed if interrupted), with progress in CoreAIRuntimeBootstrap.ModelDownloadProgress.")]
        [SerializeField] private bool downloadModelOnFirstLaunch;

        [Tooltip("Optional: download the first-launch model from here (your own CDN) instead of the catalogue's URL.")]
        [SerializeField] private string modelDownloadUrl = "";

        [Tooltip("The sha256 of the file at Model Download URL when it is not a catalogue model (required then).")]
        [SerializeField] private string modelDownloadSha256 = "";

        [Tooltip("Use this OpenAI-compatible server (LM Studio, Ollama, llama-server …) instead of hosting a model. Empty: host one.")]
        [SerializeField] private string llmUrl = "";

        [Tooltip("The name of an environment variable of the editor or game process that holds the LLM URL server's API key (e.g. OPENAI_API_KEY). The key itself is never stored in this asset. Empty: none.")]
        [SerializeField] private string llmApiKeyEnvironmentVariable = "";

        [Tooltip("Or a file whose contents are that API key (relative paths: the project folder in the Editor, the player's data folder in a build). Keep it out of version control. Empty: none.")]
        [SerializeField] private string llmApiKeyFile = "";

        [System.NonSerialized] private string llmApiKey; // set from code only: never serialized into the asset

        [Tooltip("Context size of the hosted model in tokens; 0 keeps the runtime's default (8192, never above the model's).")]
        [Min(0)]
        [SerializeField] private int contextTokens;

        [Header("Ports (loopback)")]
        [SerializeField] private int connectPort = RuntimeEndpoint.DefaultConnectPort;
        [SerializeField] private int grpcPort = RuntimeEndpoint.DefaultGrpcPort;
        [SerializeField] private int modelPort = RuntimeEndpoint.DefaultModelPort;

        [Tooltip("When a port above is taken by another program (another game's runtime, say), start on ports chosen for this project instead (the same ones each time) and log them. Off: fail with the port's name.")]
        [SerializeField] private bool choosePortsWhenTaken = true;

        [Header("Persistence")]
        [Tooltip("Persistent: files under persistentDataPath/CoreAI. SessionOnly: everything in memory, no files.")]
        [SerializeField] private AgentMemoryPersistenceMode persistenceMode = AgentMemoryPersistenceMode.Persistent;

        [Tooltip("Chat messages kept per role on disk.")]
        [Min(1)]
        [SerializeField] private int chatHistoryMessageCap = DefaultChatHistoryMessageCap;

        [Tooltip("Transcript rows kept per role on disk.")]
        [Min(1)]
        [SerializeField] private int transcriptEntryCap = DefaultTranscriptEntryCap;

        [Header("Player builds")]
        [Tooltip("Copy the frozen runtime of the build's OS (and the Model file) into Windows, macOS and Linux player builds, under StreamingAssets/CoreAI. Off: players use Runtime Path as it is (e.g. remote mode).")]
        [SerializeField] private bool bundleRuntimeInBuilds = true;

        [Tooltip("The frozen runtime built on Windows: the whole dist/coreai-runtime folder of `python tools/build_runtime.py`. Relative to the project folder.")]
        [SerializeField] private string windowsRuntimeFolder = "CoreAIRuntime/Windows";

        [Tooltip("The frozen runtime built on macOS (the whole dist/coreai-runtime folder). Relative to the project folder.")]
        [SerializeField] private string macOSRuntimeFolder = "CoreAIRuntime/macOS";

        [Tooltip("The frozen runtime built on Linux, also for the dedicated server (the whole dist/coreai-runtime folder). Relative to the project folder.")]
        [SerializeField] private string linuxRuntimeFolder = "CoreAIRuntime/Linux";

        [Header("Remote runtime")]
        [Tooltip("Connect to a runtime on a server instead of starting one: its Connect URL, https://HOST:PORT (serve --listen ADDRESS --tls-cert … --tls-key …). Required on Android, iOS and consoles, which cannot start processes (WebGL is not supported). Empty: start the runtime here.")]
        [SerializeField] private string remoteUrl = "";

        [Tooltip("The remote runtime's token (COREAI_RUNTIME_TOKEN on the server). Anything in a build can be read by its players: prefer setting RemoteToken from code at run time (e.g. from your login service).")]
        [SerializeField] private string remoteToken = "";

        [Tooltip("PEM text of the private CA (or self-signed) certificate the remote runtime's certificate must chain to. Empty: the platform's trusted roots (a certificate from a public CA).")]
        [TextArea(2, 8)]
        [SerializeField] private string remoteTrustedCertificate = "";

        [Tooltip("The game sets RemoteUrl (and the token) from code before StartRuntime, e.g. from its login service: Android, iOS and console builds are then not refused for an empty Remote Url.")]
        [SerializeField] private bool remoteUrlFromCode;

        [Tooltip("Seconds to wait for the remote runtime to answer.")]
        [Min(1)]
        [SerializeField] private float remoteConnectTimeoutSeconds = 30f;

        [Header("Unity 6 Multiplayer Play Mode")]
        [Tooltip("Each virtual player gets its own memory scope (its own player id) by default, so players sharing the project's runtime do not share NPC memory. A scope provider your code passes always wins.")]
        [SerializeField] private bool separateVirtualPlayerMemory = true;

        [Header("Lifecycle")]
        [Tooltip("Seconds the runtime may take until it answers health (model loading included).")]
        [Min(1)]
        [SerializeField] private float startTimeoutSeconds = 120f;

        [Tooltip("Restart the runtime when it dies (with doubling delays).")]
        [SerializeField] private bool restartOnCrash = true;

        [Tooltip("Longest delay between restart attempts, in seconds.")]
        [Min(0)]
        [SerializeField] private float maxRestartBackoffSeconds = 30f;

        /// <summary>What Runtime Path points at.</summary>
        public RuntimeProgram RuntimeProgram { get { return runtimeProgram; } set { runtimeProgram = value; } }

        /// <summary>The runtime program's path (or bare name).</summary>
        public string RuntimePath { get { return runtimePath; } set { runtimePath = value; } }

        /// <summary>GGUF model file to host; empty hosts the embedded model.</summary>
        public string ModelPath { get { return modelPath; } set { modelPath = value; } }

        /// <summary>The catalogue name of the model (the Models panel sets it with Model Path); empty: none.</summary>
        public string ModelName { get { return modelName; } set { modelName = value; } }

        /// <summary>Players download Model Name on first launch instead of carrying it in the build.</summary>
        public bool DownloadModelOnFirstLaunch { get { return downloadModelOnFirstLaunch; } set { downloadModelOnFirstLaunch = value; } }

        /// <summary>Where first-launch downloads come from (empty: the catalogue's URL).</summary>
        public string ModelDownloadUrl { get { return modelDownloadUrl; } set { modelDownloadUrl = value; } }

        /// <summary>The sha256 of a non-catalogue Model Download URL.</summary>
        public string ModelDownloadSha256 { get { return modelDownloadSha256; } set { modelDownloadSha256 = value; } }

        /// <summary>External OpenAI-compatible server; empty hosts a model.</summary>
        public string LlmUrl { get { return llmUrl; } set { llmUrl = value; } }

        /// <summary>The environment variable (of the editor or game process) that holds the LLM URL server's API key; empty: none.</summary>
        public string LlmApiKeyEnvironmentVariable { get { return llmApiKeyEnvironmentVariable; } set { llmApiKeyEnvironmentVariable = value; } }

        /// <summary>A file whose contents are the LLM URL server's API key; empty: none.</summary>
        public string LlmApiKeyFile { get { return llmApiKeyFile; } set { llmApiKeyFile = value; } }

        /// <summary>
        /// The LLM URL server's API key set from code (e.g. from your login service); wins over the variable and the file.
        /// Never serialized into the asset, never logged.
        /// </summary>
        public string LlmApiKey { set { llmApiKey = value; } }

        /// <summary>Start on this project's own ports when the configured ones are taken.</summary>
        public bool ChoosePortsWhenTaken { get { return choosePortsWhenTaken; } set { choosePortsWhenTaken = value; } }

        /// <summary>Context size of the hosted model; 0 = runtime default.</summary>
        public int ContextTokens { get { return contextTokens; } set { contextTokens = value; } }

        /// <summary>Port of the Connect API.</summary>
        public int ConnectPort { get { return connectPort; } set { connectPort = value; } }

        /// <summary>Port of the gRPC API.</summary>
        public int GrpcPort { get { return grpcPort; } set { grpcPort = value; } }

        /// <summary>Port of the hosted model.</summary>
        public int ModelPort { get { return modelPort; } set { modelPort = value; } }

        /// <summary>Where memory, chat, transcripts and summaries live.</summary>
        public AgentMemoryPersistenceMode PersistenceMode { get { return persistenceMode; } set { persistenceMode = value; } }

        /// <summary>Chat messages kept per key.</summary>
        public int ChatHistoryMessageCap { get { return chatHistoryMessageCap; } set { chatHistoryMessageCap = value; } }

        /// <summary>Transcript rows kept per key.</summary>
        public int TranscriptEntryCap { get { return transcriptEntryCap; } set { transcriptEntryCap = value; } }

        /// <summary>Start timeout in seconds.</summary>
        public float StartTimeoutSeconds { get { return startTimeoutSeconds; } set { startTimeoutSeconds = value; } }

        /// <summary>Restart the runtime when it dies.</summary>
        public bool RestartOnCrash { get { return restartOnCrash; } set { restartOnCrash = value; } }

        /// <summary>Longest restart delay in seconds.</summary>
        public float MaxRestartBackoffSeconds { get { return maxRestartBackoffSeconds; } set { maxRestartBackoffSeconds = value; } }

        /// <summary>Copy the frozen runtime (and the model) into player builds.</summary>
        public bool BundleRuntimeInBuilds { get { return bundleRuntimeInBuilds; } set { bundleRuntimeInBuilds = value; } }

        /// <summary>The Windows runtime folder (relative to the project folder, or absolute).</summary>
        public string WindowsRuntimeFolder { get { return windowsRuntimeFolder; } set { windowsRuntimeFolder = value; } }

        /// <summary>The macOS runtime folder (relative to the project folder, or absolute).</summary>
        public string MacOSRuntimeFolder { get { return macOSRuntimeFolder; } set { macOSRuntimeFolder = value; } }

        /// <summary>The Linux runtime folder (relative to the project folder, or absolute).</summary>
        public string LinuxRuntimeFolder { get { return linuxRuntimeFolder; } set { linuxRuntimeFolder = value; } }

        /// <summary>The remote runtime's Connect URL; empty starts a runtime here.</summary>
        public string RemoteUrl { get { return remoteUrl; } set { remoteUrl = value; } }

        /// <summary>The remote runtime's token.</summary>
        public string RemoteToken { get { return remoteToken; } set { remoteToken = value; } }

        /// <summary>PEM certificate the remote runtime's chain must end at; empty: the platform's roots.</summary>
        public string RemoteTrustedCertificate { get { return remoteTrustedCertificate; } set { remoteTrustedCertificate = value; } }

        /// <summary>The game sets RemoteUrl from code: builds that need a remote runtime are not refused for an empty one.</summary>
        public bool RemoteUrlFromCode { get { return remoteUrlFromCode; } set { remoteUrlFromCode = value; } }

        /// <summary>Seconds to wait for the remote runtime.</summary>
        public float RemoteConnectTimeoutSeconds { get { return remoteConnectTimeoutSeconds; } set { remoteConnectTimeoutSeconds = value; } }

        /// <summary>Each Multiplayer Play Mode virtual player gets its own default memory scope.</summary>
        public bool SeparateVirtualPlayerMemory { get { return separateVirtualPlayerMemory; } set { separateVirtualPlayerMemory = value; } }

        /// <summary>True when a remote URL is set: the game connects instead of starting a runtime.</summary>
        public bool UsesRemoteRuntime
        {
            get { return !string.IsNullOrWhiteSpace(remoteUrl); }
        }

        /// <summary>Remote-mode options for these settings.</summary>
        public RemoteRuntimeOptions ToRemoteOptions()
        {
            return new RemoteRuntimeOptions
            {
                Url = (remoteUrl ?? "").Trim(),
                Token = (remoteToken ?? "").Trim(),
                TrustedCertificatePem = remoteTrustedCertificate,
                ConnectTimeout = TimeSpan.FromSeconds(Math.Max(1f, remoteConnectTimeoutSeconds)),
            };
        }

        /// <summary>The runtime folder for `platform` (`windows`, `macos`, `linux`) as a full path; null for other platforms.</summary>
        public string RuntimeFolderFor(string platform, string projectRoot)
        {
            string folder = platform == "windows" ? windowsRuntimeFolder
                : platform == "macos" ? macOSRuntimeFolder
                : platform == "linux" ? linuxRuntimeFolder : null;
            return string.IsNullOrWhiteSpace(folder) ? null : Resolve(folder, projectRoot, false);
        }

        /// <summary>
        /// The model file a build bundles, as a full path (relative paths against `projectRoot`); null for the embedded model,
        /// and when players download it on first launch (nothing to bundle then).
        /// </summary>
        public string ModelFileFor(string projectRoot)
        {
            if (downloadModelOnFirstLaunch) return null;
            return string.IsNullOrWhiteSpace(modelPath) ? null : Resolve(modelPath, projectRoot, false);
        }

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
        /// <summary>
        /// Launch options for these settings (desktop editors and players only: CoreAI.Hosting exists nowhere else).
        /// `persistentDataPath` is Application.persistentDataPath;
        /// `projectRoot` resolves relative paths (the project folder in the Editor, the player's data folder in a build).
        /// </summary>
        public RuntimeLaunchOptions ToLaunchOptions(string persistentDataPath, string projectRoot, string projectId)
        {
            RuntimeLaunchOptions options = new RuntimeLaunchOptions();
            options.RuntimePath = Resolve(runtimePath, projectRoot, true);
            if (runtimeProgram == RuntimeProgram.PythonEnvironment)
                options.RuntimeArguments = new List<string> { "-m", "pyruntime.cli" };
            options.DataDir = persistentDataPath;
            options.ModelPath = string.IsNullOrWhiteSpace(modelPath) ? null : Resolve(modelPath, projectRoot, false);
            options.LlmUrl = string.IsNullOrWhiteSpace(llmUrl) ? null : llmUrl.Trim();
            if (options.LlmUrl != null) options.LlmApiKey = ResolveLlmApiKey(projectRoot);
            options.ChoosePortsWhenTaken = choosePortsWhenTaken;
            options.ContextTokens = contextTokens;
            options.ConnectPort = connectPort;
            options.GrpcPort = grpcPort;
            options.ModelPort = modelPort;
            options.ProjectId = projectId ?? "";
            options.ExtraServeArguments = ServeArguments();
            options.StartTimeout = TimeSpan.FromSeconds(Math.Max(1f, startTimeoutSeconds));
            options.RestartOnExit = restartOnCrash;
            options.RestartBackoffMax = TimeSpan.FromSeconds(Math.Max(1f, maxRestartBackoffSeconds));
            if (options.RestartBackoffInitial > options.RestartBackoffMax) options.RestartBackoffInitial = options.RestartBackoffMax;
            return options;
        }
#endif

        /// <summary>
        /// The LLM URL server's API key: set from code, else the named environment variable, else the key file; null when
        /// none is configured. Throws RuntimeLaunchException (naming the setting, never the key) when a configured source is empty.
        /// </summary>
        public string ResolveLlmApiKey(string projectRoot)
        {
            if (!string.IsNullOrEmpty(llmApiKey)) return llmApiKey.Trim();
            if (!string.IsNullOrWhiteSpace(llmApiKeyEnvironmentVariable))
            {
                string fromEnvironment = Environment.GetEnvironmentVariable(llmApiKeyEnvironmentVariable.Trim());
                if (!string.IsNullOrWhiteSpace(fromEnvironment)) return fromEnvironment.Trim();
                if (string.IsNullOrWhiteSpace(llmApiKeyFile))
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.SettingsInvalid, "CoreAI: the environment variable "
                        + llmApiKeyEnvironmentVariable.Trim() + " (CoreAIRuntimeSettings > LLM API Key Environment Variable) is not set "
                        + "in this process; an editor started from Unity Hub does not see variables of your shell");
            }
            if (string.IsNullOrWhiteSpace(llmApiKeyFile)) return null;
            string file = Resolve(llmApiKeyFile, projectRoot, false);
            string key = null;
            try
            {
                key = System.IO.File.ReadAllText(file).Trim();
            }
            catch (Exception e) when (e is System.IO.IOException || e is UnauthorizedAccessException)
            {
                // The exception's message names the path (and with it the user's name): not passed on.
            }
            if (string.IsNullOrEmpty(key))
                throw new RuntimeLaunchException(RuntimeLaunchFailure.SettingsInvalid,
                    "CoreAI: the LLM API key file (CoreAIRuntimeSettings > LLM API Key File) is missing, unreadable or empty");
            return key;
        }

        /// <summary>The `serve` flags for persistence and caps (only what differs from the runtime's defaults).</summary>
        public List<string> ServeArguments()
        {
            List<string> args = new List<string>();
            if (persistenceMode == AgentMemoryPersistenceMode.SessionOnly) args.Add("--session-only");
            if (chatHistoryMessageCap != DefaultChatHistoryMessageCap)
            {
                args.Add("--chat-history-cap");
                args.Add(chatHistoryMessageCap.ToString(System.Globalization.CultureInfo.InvariantCulture));
            }
            if (transcriptEntryCap != DefaultTranscriptEntryCap)
            {
                args.Add("--transcript-cap");
                args.Add(transcriptEntryCap.ToString(System.Globalization.CultureInfo.InvariantCulture));
            }
            return args;
        }

        /// <summary>
        /// The settings a build writes to `serve --config` next to the bundled runtime (keys as serve's --config takes them):
        /// persistence, caps and context. The launcher passes them as flags too; the file is what a server operator edits.
        /// </summary>
        public Dictionary<string, object> ServeConfig()
        {
            Dictionary<string, object> config = new Dictionary<string, object>();
            config["session_only"] = persistenceMode == AgentMemoryPersistenceMode.SessionOnly;
            config["chat_history_cap"] = chatHistoryMessageCap;
            config["transcript_cap"] = transcriptEntryCap;
            if (contextTokens > 0) config["ctx"] = contextTokens;
            return config;
        }

        private static string Resolve(string path, string root, bool bareNameOnPath)
        {
            if (string.IsNullOrWhiteSpace(path)) return path;
            string trimmed = path.Trim();
            bool bareName = trimmed.IndexOf('/') < 0 && trimmed.IndexOf('\\') < 0;
            if ((bareName && bareNameOnPath) || System.IO.Path.IsPathRooted(trimmed) || string.IsNullOrEmpty(root)) return trimmed;
            return System.IO.Path.GetFullPath(System.IO.Path.Combine(root, trimmed));
        }
    }
}
