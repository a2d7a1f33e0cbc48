using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Downloads;
using CoreAI.UnityIntegration;
using Newtonsoft.Json.Linq;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// What the Models window does, apart from drawing: pull a catalogue model into the project's `CoreAIModels/`
    /// (the runtime's cache layout) and assign it to the settings; fetch the released runtime for an OS into the
    /// settings' runtime folder. Downloads run on pool threads; their progress and results reach the main thread
    /// through <see cref="Pump"/>, which the window calls every editor update.
    /// </summary>
    public sealed class ModelsPanel
    {
        /// <summary>The project folder models are pulled into (next to Assets, so Unity does not import gigabytes).</summary>
        public const string ModelsFolderName = "CoreAIModels";

        /// <summary>The package's name in Packages/manifest.json.</summary>
        public const string PackageName = "com.coreai.agent-memory";

        private readonly MainThreadQueue mainThread = new MainThreadQueue();
        private readonly CoreAIRuntimeSettings settings;
        private readonly string projectRoot;
        private CancellationTokenSource cancel;

        /// <summary>A panel for `settings` in the project at `projectRoot`.</summary>
        public ModelsPanel(CoreAIRuntimeSettings settings, string projectRoot)
        {
            this.settings = settings;
            this.projectRoot = projectRoot;
            Status = "";
        }

        /// <summary>Raised on the main thread with each progress report of the running download.</summary>
        public event Action<DownloadProgress> ProgressChanged;

        /// <summary>Raised on the main thread when a download ended: null on success, else the error.</summary>
        public event Action<Exception> Finished;

        /// <summary>The store models are pulled into: `&lt;project&gt;/CoreAIModels`.</summary>
        public ModelStore Store
        {
            get { return new ModelStore(Path.Combine(projectRoot, ModelsFolderName)); }
        }

        /// <summary>The latest progress of the running download (null when none ran yet).</summary>
        public DownloadProgress Progress { get; private set; }

        /// <summary>A line for the window: what is happening, or what went wrong.</summary>
        public string Status { get; private set; }

        /// <summary>True while a download runs.</summary>
        public bool Busy { get; private set; }

        /// <summary>Runs what the downloads posted (progress, results) on the calling, main thread; returns how many ran.</summary>
        public int Pump()
        {
            return mainThread.Drain(int.MaxValue, e => CoreAILog.Exception("a Models panel callback failed", e));
        }

        /// <summary>Pulls `model` (kept if already pulled); on success Model Name and Model Path point at it.</summary>
        public Task Pull(CatalogModel model)
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            CancellationToken token = Begin("downloading " + model.Name);
            Task<string> pulling = Store.PullAsync(model, new MainThreadProgress(mainThread, OnProgress), token);
            return Complete(pulling, path =>
            {
                settings.ModelName = model.Name;
                settings.ModelPath = ModelsFolderName + "/" + model.FileName; // relative: the project can move
                EditorUtility.SetDirty(settings);
                Status = model.Name + " is pulled and assigned to " + settings.name + " (" + model.License + ")";
            });
        }

        /// <summary>
        /// Fetches the released runtime for `os` (windows, macos, linux) and `arch` (x64, arm64) from `releaseBaseUrl`
        /// (null: the release of the tag the package was installed from) into the settings' runtime folder for that OS.
        /// Fetched for the editor's own OS, the settings then start that runtime (Bundled Executable).
        /// </summary>
        public Task FetchRuntime(string os, string arch, string releaseBaseUrl)
        {
            string baseUrl = string.IsNullOrWhiteSpace(releaseBaseUrl) ? InstalledReleaseUrl() : releaseBaseUrl.Trim();
            if (baseUrl == null)
            {
                Status = "The package was not installed from a GitHub git URL, so its release is unknown: enter the release URL.";
                return Task.FromResult(0);
            }
            string folder = settings.RuntimeFolderFor(os, projectRoot);
            CancellationToken token = Begin("downloading the " + os + "-" + arch + " runtime");
            Task<string> fetching = RuntimeArchive.FetchAsync(baseUrl, os, arch, folder, new MainThreadProgress(mainThread, OnProgress), token);
            return Complete(fetching, executable =>
            {
                if (os == EditorOs())
                {
                    settings.RuntimeProgram = RuntimeProgram.BundledExecutable;
                    settings.RuntimePath = Relative(executable);
                    EditorUtility.SetDirty(settings);
                }
                Status = "the " + os + "-" + arch + " runtime is in " + Relative(folder);
            });
        }

        /// <summary>Stops the running download (its partial file is kept: the next one resumes).</summary>
        public void Cancel()
        {
            if (cancel != null) cancel.Cancel();
        }

        /// <summary>The release download URL of the package's git URL in Packages/manifest.json, or null.</summary>
        public string InstalledReleaseUrl()
        {
            string manifest = Path.Combine(Path.Combine(projectRoot, "Packages"), "manifest.json");
            try
            {
                JToken url = JObject.Parse(File.ReadAllText(manifest))["dependencies"]?[PackageName];
                return url == null ? null : RuntimeArchive.ReleaseBaseUrl((string)url, CoreAIPackage.Version);
            }
            catch (Exception e) when (e is IOException || e is Newtonsoft.Json.JsonException || e is InvalidCastException)
            {
                return null;
            }
        }

        /// <summary>The editor's OS as the runtime archives name it.</summary>
        public static string EditorOs()
        {
            switch (Application.platform)
            {
                case RuntimePlatform.WindowsEditor:
                    return "windows";
                case RuntimePlatform.OSXEditor:
                    return "macos";
                default:
                    return "linux";
            }
        }

        private CancellationToken Begin(string what)
        {
            if (Busy) throw new InvalidOperationException("a download is already running");
            Busy = true;
            Progress = null;
            Status = what + " …";
            cancel = new CancellationTokenSource();
            return cancel.Token;
        }

        private Task Complete(Task<string> download, Action<string> onSuccess)
        {
            TaskCompletionSource<bool> done = new TaskCompletionSource<bool>();
            download.ContinueWith(t => mainThread.Post(() =>
            {
                Busy = false;
                Exception error = t.IsFaulted ? t.Exception.GetBaseException() : t.IsCanceled ? new OperationCanceledException("cancelled") : null;
                if (error == null) onSuccess(t.Result);
                else Status = error.Message;
                if (Finished != null) Finished(error);
                done.TrySetResult(error == null);
            }));
            return done.Task;
        }

        private void OnProgress(DownloadProgress progress)
        {
            Progress = progress;
            if (ProgressChanged != null) ProgressChanged(progress);
        }

        private string Relative(string path)
        {
            string root = Path.GetFullPath(projectRoot).TrimEnd(Path.DirectorySeparatorChar) + Path.DirectorySeparatorChar;
            string full = Path.GetFullPath(path);
            return full.StartsWith(root, StringComparison.Ordinal) ? full.Substring(root.Length).Replace('\\', '/') : full;
        }

        private string PackageVersion()
        {
            string package = Path.Combine(Path.Combine(Path.Combine(projectRoot, "Packages"), PackageName), "package.json");
            try
            {
                return File.Exists(package) ? (string)JObject.Parse(File.ReadAllText(package))["version"] : null;
            }
            catch (Exception e) when (e is IOException || e is Newtonsoft.Json.JsonException)
            {
                return null;
            }
        }
    }
}
