using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Downloads;
using CoreAI.Launcher;
using CoreAI.UnityIntegration;
using Newtonsoft.Json;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// The editor's model pulls and runtime fetches, owned by the editor rather than by a window: closing the Models
    /// window does not stop one, and a script reload or pressing Play (a domain reload) pauses it, keeping what arrived,
    /// and resumes it right after (the job is kept in SessionState). Its result reaches the project's settings asset on
    /// the main thread (EditorApplication.update). A dropped connection is retried, resuming, up to four times. A
    /// cancelled or failed download leaves no partial and no lock file behind. One download at a time.
    /// </summary>
    [InitializeOnLoad]
    public static class EditorDownloads
    {
        private const string SessionKey = "CoreAI.EditorDownloads.Job";
        private const int MaxAttempts = 4;
        private static readonly TimeSpan StopWait = TimeSpan.FromSeconds(3);
        private static readonly MainThreadQueue MainThread = new MainThreadQueue();

        private static EditorDownloadJob job;
        private static CoreAIRuntimeSettings directSettings;  // a settings object that is no asset (tests, a fresh one)
        private static CancellationTokenSource cancel;
        private static CancellationTokenSource pause;
        private static Task running;
        private static TaskCompletionSource<bool> completion;
        private static DateTime retryAt = DateTime.MaxValue;

        static EditorDownloads()
        {
            Status = "";
            EditorApplication.update += Update;
            AssemblyReloadEvents.beforeAssemblyReload += PauseForReload;
            EditorApplication.quitting += PauseForReload;
            string saved = SessionState.GetString(SessionKey, "");
            if (saved.Length > 0) Resume(JsonConvert.DeserializeObject<EditorDownloadJob>(saved));
        }

        /// <summary>Raised on the main thread with each progress report.</summary>
        public static event Action<DownloadProgress> ProgressChanged;

        /// <summary>Raised on the main thread when a download ended: null on success, else the error.</summary>
        public static event Action<Exception> Finished;

        /// <summary>True while a download runs (or waits to resume).</summary>
        public static bool Busy
        {
            get { return job != null; }
        }

        /// <summary>The latest progress of the running download (null when none ran yet).</summary>
        public static DownloadProgress Progress { get; private set; }

        /// <summary>A line for the window: what is happening, or what went wrong.</summary>
        public static string Status { get; private set; }

        /// <summary>
        /// Pulls `model` into `projectRoot/CoreAIModels` (kept if already pulled); on success `settings`' Model Name and
        /// Model Path point at it. Completes with true on success, false otherwise (within this domain).
        /// </summary>
        public static Task<bool> PullModel(CoreAIRuntimeSettings settings, string projectRoot, CatalogModel model)
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            return Begin(settings, new EditorDownloadJob
            {
                Kind = EditorDownloadJob.ModelKind,
                ProjectRoot = projectRoot,
                ModelName = model.Name,
                Url = model.Url,
                Sha256 = model.Sha256,
                Size = model.SizeBytes,
                FileName = model.FileName,
                License = model.License,
            });
        }

        /// <summary>
        /// Fetches the released runtime for `os`/`arch` from `releaseBaseUrl` into the settings' folder for that OS; for the
        /// editor's own OS the settings then start it. A runtime running from that folder is not disturbed: the new one
        /// takes its place at the next start.
        /// </summary>
        public static Task<bool> FetchRuntime(CoreAIRuntimeSettings settings, string projectRoot, string os, string arch,
            string releaseBaseUrl, string editorOs, string persistentDataPath)
        {
            return Begin(settings, new EditorDownloadJob
            {
                Kind = EditorDownloadJob.RuntimeKind,
                ProjectRoot = projectRoot,
                Os = os,
                Arch = arch,
                ReleaseBaseUrl = releaseBaseUrl,
                EditorOs = editorOs,
                PersistentDataPath = persistentDataPath,
            });
        }

        /// <summary>Stops the running download; nothing of it is kept.</summary>
        public static void Cancel()
        {
            if (job == null) return;
            retryAt = DateTime.MaxValue;
            if (cancel != null && running != null && !running.IsCompleted)
            {
                cancel.Cancel();  // the downloader deletes its partial file; the result arrives through Update
                return;
            }
            Discard(job);
            End(new OperationCanceledException("the download of " + job.Label + " was cancelled"));
        }

        /// <summary>Runs what the download posted (progress, result) on the calling, main thread; returns how many ran.</summary>
        public static int Pump()
        {
            int ran = MainThread.Drain(int.MaxValue, e => CoreAILog.Exception("a download callback failed", e));
            if (job != null && running == null && DateTime.UtcNow >= retryAt) Run();
            return ran;
        }

        private static void Update()
        {
            Pump();
        }

        private static Task<bool> Begin(CoreAIRuntimeSettings settings, EditorDownloadJob started)
        {
            if (settings == null) throw new ArgumentNullException(nameof(settings));
            if (job != null) throw new InvalidOperationException("a download is already running: " + job.Label);
            started.SettingsPath = AssetDatabase.GetAssetPath(settings);
            directSettings = settings;
            completion = new TaskCompletionSource<bool>();
            job = started;
            Progress = null;
            Save();
            Run();
            return completion.Task;
        }

        private static void Resume(EditorDownloadJob saved)
        {
            if (saved == null) return;
            job = saved;
            completion = new TaskCompletionSource<bool>();
            Status = "resuming " + job.Label + " …";
            Run();
        }

        private static void Run()
        {
            EditorDownloadJob current = job;
            retryAt = DateTime.MaxValue;
            cancel = new CancellationTokenSource();
            pause = new CancellationTokenSource();
            Status = "downloading " + current.Label + " …";
            MainThreadProgress progress = new MainThreadProgress(MainThread, OnProgress);
            Task<string> download;
            if (current.Kind == EditorDownloadJob.ModelKind)
            {
                download = Store(current).PullAsync(current.ModelName, current.Url, current.Sha256, current.Size, "catalogue", progress,
                    cancel.Token, pause.Token);
            }
            else
            {
                string folder = RuntimeFolder(current);
                string dataDir = current.Os == current.EditorOs ? current.PersistentDataPath : null;
                download = RuntimeArchive.FetchAsync(current.ReleaseBaseUrl, current.Os, current.Arch, folder, progress, cancel.Token,
                        target => RuntimeLauncher.RunsFrom(dataDir, target), pause.Token)
                    .ContinueWith(t => Describe(t.GetAwaiter().GetResult()), TaskContinuationOptions.ExecuteSynchronously);
            }
            running = download;
            download.ContinueWith(t => MainThread.Post(() => OnEnded(current, t)));
        }

        private static string Describe(FetchedRuntime fetched)
        {
            return fetched.Executable + "\n" + (fetched.WaitsForNextStart ? "pending" : "now");
        }

        private static void OnEnded(EditorDownloadJob ended, Task<string> task)
        {
            if (ended != job) return;
            running = null;
            Exception error = task.IsFaulted ? task.Exception.GetBaseException() : task.IsCanceled ? new OperationCanceledException() : null;
            DownloadException failure = error as DownloadException;
            if (failure != null && failure.Kind == DownloadFailure.Paused) return;  // a reload or quit: the next domain resumes it
            if (failure != null && failure.Kind == DownloadFailure.Interrupted && ++ended.Attempts < MaxAttempts)
            {
                Save();
                retryAt = DateTime.UtcNow + TimeSpan.FromSeconds(ended.Attempts);
                Status = failure.Message + " (retrying, attempt " + (ended.Attempts + 1) + " of " + MaxAttempts + ")";
                return;
            }
            if (error != null)
            {
                Discard(ended);
                End(error);
                return;
            }
            try
            {
                Apply(ended, task.Result);
            }
            catch (Exception e)
            {
                End(e);
                return;
            }
            End(null);
        }

        private static void Apply(EditorDownloadJob done, string result)
        {
            CoreAIRuntimeSettings settings = Settings(done);
            if (done.Kind == EditorDownloadJob.ModelKind)
            {
                if (settings != null)
                {
                    settings.ModelName = done.ModelName;
                    settings.ModelPath = ModelsPanel.ModelsFolderName + "/" + done.FileName;  // relative: the project can move
                    EditorUtility.SetDirty(settings);
                }
                Status = done.ModelName + " is pulled" + (settings != null ? " and assigned to " + settings.name : "") + " (" + done.License + ")";
                return;
            }
            string[] parts = result.Split('\n');
            bool pending = parts.Length > 1 && parts[1] == "pending";
            if (settings != null && done.Os == done.EditorOs)
            {
                settings.RuntimeProgram = RuntimeProgram.BundledExecutable;
                settings.RuntimePath = Relative(done.ProjectRoot, parts[0]);
                EditorUtility.SetDirty(settings);
            }
            Status = "the " + done.Os + "-" + done.Arch + " runtime is in " + Relative(done.ProjectRoot, RuntimeFolder(done))
                + (pending ? "; the running runtime keeps going, and the new one replaces it at its next start" : "");
        }

        private static void End(Exception error)
        {
            TaskCompletionSource<bool> done = completion;
            job = null;
            running = null;
            directSettings = null;
            retryAt = DateTime.MaxValue;
            SessionState.EraseString(SessionKey);
            if (error != null) Status = error is OperationCanceledException ? "cancelled" : error.Message;
            if (Finished != null) Finished(error);
            if (done != null) done.TrySetResult(error == null);
        }

        /// <summary>A failed or cancelled download leaves nothing: its partial file goes (the lock file goes by itself).</summary>
        private static void Discard(EditorDownloadJob failed)
        {
            if (failed.Kind == EditorDownloadJob.ModelKind) Store(failed).DiscardPartial(failed.ModelName);
            else RuntimeArchive.DiscardDownload(RuntimeFolder(failed), failed.Os, failed.Arch);
        }

        private static void PauseForReload()
        {
            if (job == null) return;
            Save();
            if (pause != null) pause.Cancel();
            Task current = running;
            // The download's threads end with the domain: let it close its files first (it stops within a read).
            if (current != null) current.ContinueWith(_ => { }).Wait(StopWait);
        }

        private static void OnProgress(DownloadProgress progress)
        {
            Progress = progress;
            if (ProgressChanged != null) ProgressChanged(progress);
        }

        private static void Save()
        {
            if (job != null) SessionState.SetString(SessionKey, JsonConvert.SerializeObject(job));
        }

        private static CoreAIRuntimeSettings Settings(EditorDownloadJob done)
        {
            CoreAIRuntimeSettings fromAsset = string.IsNullOrEmpty(done.SettingsPath) ? null
                : AssetDatabase.LoadAssetAtPath<CoreAIRuntimeSettings>(done.SettingsPath);
            return fromAsset != null ? fromAsset : directSettings;
        }

        private static ModelStore Store(EditorDownloadJob current)
        {
            return new ModelStore(Path.Combine(current.ProjectRoot, ModelsPanel.ModelsFolderName));
        }

        private static string RuntimeFolder(EditorDownloadJob current)
        {
            CoreAIRuntimeSettings settings = Settings(current);
            string folder = settings != null ? settings.RuntimeFolderFor(current.Os, current.ProjectRoot) : null;
            return folder ?? Path.Combine(Path.Combine(current.ProjectRoot, "CoreAIRuntime"), current.Os);
        }

        private static string Relative(string projectRoot, string path)
        {
            string root = Path.GetFullPath(projectRoot).TrimEnd(Path.DirectorySeparatorChar) + Path.DirectorySeparatorChar;
            string full = Path.GetFullPath(path);
            return full.StartsWith(root, StringComparison.Ordinal) ? full.Substring(root.Length).Replace('\\', '/') : full;
        }
    }
}
