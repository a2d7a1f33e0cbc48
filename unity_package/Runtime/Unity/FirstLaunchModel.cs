#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Downloads;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// "Download on first launch": a player build that does not bundle its model pulls it into
    /// `persistentDataPath/CoreAI/models` (the runtime's cache layout) before the runtime starts, checked against the
    /// catalogue's sha256, resuming where an interrupted first launch stopped. Later launches find it there.
    /// </summary>
    public static class FirstLaunchModel
    {
        /// <summary>True when a player must download the model (the setting is on; the editor uses its Model Path).</summary>
        public static bool IsNeeded(CoreAIRuntimeSettings settings, bool isEditor)
        {
            return settings != null && !isEditor && settings.DownloadModelOnFirstLaunch && string.IsNullOrWhiteSpace(settings.LlmUrl);
        }

        /// <summary>
        /// Pulls the settings' model (Model Name from the catalogue, from Model Download URL when set) into the store under
        /// `persistentDataPath`; the task's result is the model file. `onProgress` runs on the thread that drains `mainThread`.
        /// Read `persistentDataPath` on the main thread (Unity's rule) and pass it in.
        /// </summary>
        public static Task<string> DownloadAsync(CoreAIRuntimeSettings settings, string persistentDataPath, MainThreadQueue mainThread,
            Action<DownloadProgress> onProgress, CancellationToken cancellation)
        {
            return DownloadAsync(settings, persistentDataPath, mainThread, onProgress, cancellation, CancellationToken.None);
        }

        /// <summary>
        /// DownloadAsync where `cancellation` cancels it for good (nothing kept: the player chose not to download) and
        /// `pause` stops it keeping what arrived (the game quits mid-download: the next launch resumes).
        /// </summary>
        public static Task<string> DownloadAsync(CoreAIRuntimeSettings settings, string persistentDataPath, MainThreadQueue mainThread,
            Action<DownloadProgress> onProgress, CancellationToken cancellation, CancellationToken pause)
        {
            if (settings == null) throw new ArgumentNullException(nameof(settings));
            if (string.IsNullOrEmpty(persistentDataPath)) throw new ArgumentException("persistentDataPath is empty");
            CatalogModel entry = ModelCatalog.Find(settings.ModelName);
            string url = string.IsNullOrWhiteSpace(settings.ModelDownloadUrl) ? (entry != null ? entry.Url : null) : settings.ModelDownloadUrl.Trim();
            if (entry == null && string.IsNullOrWhiteSpace(settings.ModelDownloadSha256))
                return Failed("CoreAI: Download Model On First Launch needs a catalogue Model Name (CoreAI > Models), or a Model Download URL "
                    + "with its Model Download Sha256; '" + settings.ModelName + "' is neither");
            if (string.IsNullOrEmpty(url)) return Failed("CoreAI: Download Model On First Launch has no URL to download '" + settings.ModelName + "' from");
            string sha256 = string.IsNullOrWhiteSpace(settings.ModelDownloadSha256) ? entry.Sha256 : settings.ModelDownloadSha256.Trim();
            long size = entry != null && string.IsNullOrWhiteSpace(settings.ModelDownloadSha256) ? entry.SizeBytes : -1;
            IProgress<DownloadProgress> progress = onProgress == null || mainThread == null ? null : new MainThreadProgress(mainThread, onProgress);
            ModelStore store = ModelStore.UnderDataDir(persistentDataPath);
            try
            {
                return store.PullAsync(settings.ModelName, url, sha256, size, entry != null ? "catalogue" : "url", progress, cancellation, pause);
            }
            catch (ArgumentException e)
            {
                return Failed("CoreAI: Model Name: " + e.Message);
            }
        }

        private static Task<string> Failed(string message)
        {
            return Task.FromException<string>(new DownloadException(DownloadFailure.NotUsable, message));
        }
    }
}
#endif
