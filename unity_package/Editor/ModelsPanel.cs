using System;
using System.IO;
using System.Threading.Tasks;
using CoreAI.Downloads;
using CoreAI.UnityIntegration;
using Newtonsoft.Json.Linq;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// What the Models window shows and starts, apart from drawing: the catalogue with what is pulled, the release the
    /// package came from, and the downloads, which <see cref="EditorDownloads"/> runs for the editor (so they outlive the
    /// window, script reloads and Play). What needs the disk or JSON is read by <see cref="Refresh"/> — when the window
    /// opens, gets focus, or a download ends — never on a repaint.
    /// </summary>
    public sealed class ModelsPanel
    {
        /// <summary>The project folder models are pulled into (next to Assets, so Unity does not import gigabytes).</summary>
        public const string ModelsFolderName = "CoreAIModels";

        /// <summary>The package's name in Packages/manifest.json.</summary>
        public const string PackageName = "com.coreai.agent-memory";

        private readonly CoreAIRuntimeSettings settings;
        private readonly string projectRoot;
        private string[] modelLabels = new string[0];
        private string releaseUrl;

        /// <summary>A panel for `settings` in the project at `projectRoot` (read once here: see Refresh).</summary>
        public ModelsPanel(CoreAIRuntimeSettings settings, string projectRoot)
        {
            this.settings = settings;
            this.projectRoot = projectRoot;
            Refresh();
        }

        /// <summary>Raised on the main thread with each progress report of the running download.</summary>
        public event Action<DownloadProgress> ProgressChanged
        {
            add { EditorDownloads.ProgressChanged += value; }
            remove { EditorDownloads.ProgressChanged -= value; }
        }

        /// <summary>Raised on the main thread when a download ended: null on success, else the error.</summary>
        public event Action<Exception> Finished
        {
            add { EditorDownloads.Finished += value; }
            remove { EditorDownloads.Finished -= value; }
        }

        /// <summary>The store models are pulled into: `&lt;project&gt;/CoreAIModels`.</summary>
        public ModelStore Store
        {
            get { return new ModelStore(Path.Combine(projectRoot, ModelsFolderName)); }
        }

        /// <summary>The catalogue's names, " (pulled)" after those in the store, as of the last Refresh.</summary>
        public string[] ModelLabels
        {
            get { return modelLabels; }
        }

        /// <summary>The release download URL of the tag the package came from, as of the last Refresh (null: unknown).</summary>
        public string ReleaseUrl
        {
            get { return releaseUrl; }
        }

        /// <summary>How many times the disk was read for the window (tests: repaints must not).</summary>
        public int Refreshes { get; private set; }

        /// <summary>The latest progress of the running download (null when none ran yet).</summary>
        public DownloadProgress Progress
        {
            get { return EditorDownloads.Progress; }
        }

        /// <summary>A line for the window: what is happening, or what went wrong.</summary>
        public string Status
        {
            get { return EditorDownloads.Status; }
        }

        /// <summary>True while a download runs.</summary>
        public bool Busy
        {
            get { return EditorDownloads.Busy; }
        }

        /// <summary>Reads what the window shows from the disk: which models are pulled, the release URL.</summary>
        public void Refresh()
        {
            Refreshes++;
            ModelStore store = Store;
            string[] labels = new string[ModelCatalog.Entries.Count];
            for (int i = 0; i < labels.Length; i++)
            {
                CatalogModel entry = ModelCatalog.Entries[i];
                labels[i] = entry.Name + (store.IsPulled(entry.Name) ? "  (pulled)" : "");
            }
            modelLabels = labels;
            releaseUrl = InstalledReleaseUrl();
        }

        /// <summary>Runs what the downloads posted (progress, results) on the calling, main thread; returns how many ran.</summary>
        public int Pump()
        {
            return EditorDownloads.Pump();
        }

        /// <summary>Pulls `model` (kept if already pulled); on success Model Name and Model Path point at it.</summary>
        public Task<bool> Pull(CatalogModel model)
        {
            return EditorDownloads.PullModel(settings, projectRoot, model);
        }

        /// <summary>
        /// Fetches the released runtime for `os` (windows, macos, linux) and `arch` (x64, arm64) from `releaseBaseUrl`
        /// (null: the release of the tag the package was installed from) into the settings' runtime folder for that OS.
        /// Fetched for the editor's own OS, the settings then start that runtime (Bundled Executable).
        /// </summary>
        public Task<bool> FetchRuntime(string os, string arch, string releaseBaseUrl)
        {
            string baseUrl = string.IsNullOrWhiteSpace(releaseBaseUrl) ? releaseUrl : releaseBaseUrl.Trim();
            if (baseUrl == null) return Task.FromResult(false);
            if (arch == null) return Task.FromResult(false);
            return EditorDownloads.FetchRuntime(settings, projectRoot, os, arch, baseUrl, EditorOs(), Application.persistentDataPath);
        }

        /// <summary>Why FetchRuntime would not start (no release URL, no archive for this machine), or null.</summary>
        public string FetchRefusal(string arch, string releaseBaseUrl)
        {
            if (string.IsNullOrWhiteSpace(releaseBaseUrl) && releaseUrl == null)
                return "The package was not installed from a GitHub git URL, so its release is unknown: enter the release URL.";
            if (arch == null)
                return "No runtime is released for this machine's CPU (released: " + string.Join(", ", RuntimeArchive.Released) + ").";
            return null;
        }

        /// <summary>Stops the running download; nothing of it is kept.</summary>
        public void Cancel()
        {
            EditorDownloads.Cancel();
        }

        /// <summary>The release download URL of the package's git URL in Packages/manifest.json, or null.</summary>
        public string InstalledReleaseUrl()
        {
            string manifest = Path.Combine(Path.Combine(projectRoot, "Packages"), "manifest.json");
            try
            {
                if (!File.Exists(manifest)) return null;
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
