using System;
using System.Collections.Generic;
using System.IO;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Launcher;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace CoreAI.Downloads
{
    /// <summary>
    /// A folder of pulled models, laid out as the runtime's cache is (`coreai-runtime models pull`): `&lt;name&gt;.gguf`, a
    /// `&lt;name&gt;.json` manifest written after the file is in place, partial downloads in `.partial/`. So a model pulled
    /// here is one `serve --model NAME --models-dir FOLDER` finds, and the other way round. A model counts as pulled when
    /// both files exist and the model still has the recorded size.
    /// </summary>
    public sealed class ModelStore
    {
        /// <summary>The cache folder under a data dir (persistentDataPath): `CoreAI/models`.</summary>
        public const string RelativeFolder = "CoreAI/models";

        private const int MaxManifestBytes = 64 * 1024;
        private static readonly Regex ValidName = new Regex("^[a-z0-9][a-z0-9._-]{0,63}$");

        /// <summary>A store in `folder` (created when a model is pulled).</summary>
        public ModelStore(string folder)
        {
            if (string.IsNullOrEmpty(folder)) throw new ArgumentException("the models folder is empty");
            Folder = Path.GetFullPath(folder);
        }

        /// <summary>The store under a data dir: `dataDir/CoreAI/models`.</summary>
        public static ModelStore UnderDataDir(string dataDir)
        {
            return new ModelStore(Path.Combine(Path.Combine(dataDir, "CoreAI"), "models"));
        }

        /// <summary>The folder.</summary>
        public string Folder { get; private set; }

        /// <summary>The most bytes a pull of a URL without a known size may bring (catalogue models are held to their size).</summary>
        public long MaxDownloadBytes { get; set; } = DownloadRequest.DefaultMaxBytes;

        /// <summary>A pull never leaves less free on the disk than this.</summary>
        public long KeepFreeBytes { get; set; } = DownloadRequest.DefaultKeepFreeBytes;

        /// <summary>Where the model `name` lives, pulled or not.</summary>
        public string PathOf(string name)
        {
            return Path.Combine(Folder, CheckName(name) + ".gguf");
        }

        /// <summary>True when `name` is pulled and its file still has the recorded size (a manifest that is a link or FIFO counts as none).</summary>
        public bool IsPulled(string name)
        {
            string model = PathOf(name);
            try
            {
                JObject data = ReadManifest(name);
                return data != null && data["size_bytes"] != null && File.Exists(model) && (long)data["size_bytes"] == new FileInfo(model).Length;
            }
            catch (Exception e) when (e is IOException || e is FormatException || e is ArgumentException || e is InvalidCastException || e is OverflowException)
            {
                return false;
            }
        }

        /// <summary>Names of every pulled model, sorted.</summary>
        public List<string> Pulled()
        {
            List<string> names = new List<string>();
            if (!Directory.Exists(Folder)) return names;
            foreach (string manifest in Directory.GetFiles(Folder, "*.json"))
            {
                string name = Path.GetFileNameWithoutExtension(manifest);
                if (ValidName.IsMatch(name) && IsPulled(name)) names.Add(name);
            }
            names.Sort(StringComparer.Ordinal);
            return names;
        }

        /// <summary>Pulls a catalogue model on a pool thread (a pulled, matching one is kept); the result is its file.</summary>
        public Task<string> PullAsync(CatalogModel model, IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            if (model == null) throw new ArgumentNullException(nameof(model));
            return PullAsync(model.Name, model.Url, model.Sha256, model.SizeBytes, "catalogue", progress, cancellation);
        }

        /// <summary>Pulls `url` as `name` on a pool thread (sha256 null: not checked; size -1: not known); the result is its file.</summary>
        public Task<string> PullAsync(string name, string url, string sha256, long size, string source, IProgress<DownloadProgress> progress,
            CancellationToken cancellation)
        {
            return PullAsync(name, url, sha256, size, source, progress, cancellation, CancellationToken.None);
        }

        /// <summary>
        /// PullAsync that `pause` can stop while keeping what arrived (DownloadFailure.Paused; the next pull resumes it),
        /// where `cancellation` stops it and deletes the partial file (DownloadFailure.Cancelled).
        /// </summary>
        public Task<string> PullAsync(string name, string url, string sha256, long size, string source, IProgress<DownloadProgress> progress,
            CancellationToken cancellation, CancellationToken pause)
        {
            string checkedName = CheckName(name);
            return Task.Run(() => Pull(checkedName, url, sha256, size, source, progress, cancellation, pause));
        }

        /// <summary>The partial download of `name` (what a paused or interrupted pull kept), pulled or not.</summary>
        public string PartialPathOf(string name)
        {
            return Path.Combine(PartialFolder, CheckName(name) + ".gguf" + PartialDownload.PartialSuffix);
        }

        /// <summary>
        /// Deletes what a paused or interrupted pull of `name` kept (a pull given up for good leaves nothing); nothing while a
        /// pull of it runs (a cancelled one deletes its bytes itself).
        /// </summary>
        public void DiscardPartial(string name)
        {
            PartialDownload.DiscardIfIdle(PartialFolder, true, CheckName(name) + ".gguf");
        }

        /// <summary>
        /// Deletes the model `name` (file, manifest, partial download and its record); false when there was nothing. A pull
        /// of it that is running is not interrupted: DownloadException (Busy), nothing removed.
        /// </summary>
        public bool Remove(string name)
        {
            string checkedName = CheckName(name);
            if (!Directory.Exists(Folder)) return false;
            using (PartialDownload files = PartialDownload.TryLock(PartialFolder, true, checkedName + ".gguf"))
            {
                if (files == null)
                    throw new DownloadException(DownloadFailure.Busy, "a download of " + checkedName + " is running; stop it first (nothing was removed)");
                bool removed = files.Size() > 0 || files.Remote() != null;
                files.Discard();
                using (ConfinedFolder folder = ConfinedFolder.Open(Folder, false))
                {
                    removed = folder.Delete(checkedName + ".json") | removed;
                    removed = folder.Delete(checkedName + ".gguf") | removed;
                }
                return removed;
            }
        }

        /// <summary>`name` when it is a valid model name (1-64 of a-z 0-9 . _ -); throws ArgumentException otherwise.</summary>
        public static string CheckName(string name)
        {
            string lowered = (name ?? "").Trim().ToLowerInvariant();
            if (!ValidName.IsMatch(lowered) || lowered.EndsWith(".gguf", StringComparison.Ordinal))
                throw new ArgumentException("a model name is 1-64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit (not a path)");
            return lowered;
        }

        private string Pull(string name, string url, string sha256, long size, string source, IProgress<DownloadProgress> progress,
            CancellationToken cancellation, CancellationToken pause)
        {
            string model = PathOf(name);
            if (IsPulled(name) && (string.IsNullOrEmpty(sha256) || string.Equals(RecordedSha256(name), sha256, StringComparison.OrdinalIgnoreCase)))
                return model;
            DownloadRequest request = new DownloadRequest
            {
                Url = url,
                Destination = model,
                PartialFolder = PartialFolder,
                Sha256 = sha256,
                Size = size,
                Validate = GgufFile.Check,
                Label = name,
                Pause = pause,
                MaxBytes = MaxDownloadBytes,
                KeepFreeBytes = KeepFreeBytes,
            };
            string digest = FileDownloader.Download(request, progress, cancellation);
            JObject data = new JObject
            {
                ["name"] = name,
                ["path"] = name + ".gguf",
                ["sha256"] = digest,
                ["size_bytes"] = new FileInfo(model).Length,
                ["url"] = url,
                ["source"] = source ?? "url",
                ["pulled_at"] = (long)(DateTime.UtcNow - new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc)).TotalSeconds,
                ["version"] = 1,
            };
            // A new file renamed over the name: a link or FIFO planted there is replaced, never written through.
            using (ConfinedFolder folder = ConfinedFolder.Open(Folder, false))
                folder.WriteAtomically(name + ".json", new UTF8Encoding(false).GetBytes(data.ToString(Formatting.Indented) + "\n"));
            return model;
        }

        private string RecordedSha256(string name)
        {
            try
            {
                JObject data = ReadManifest(name);
                return data != null ? (string)data["sha256"] : null;
            }
            catch (Exception e) when (e is IOException || e is InvalidCastException || e is ArgumentException)
            {
                return null;
            }
        }

        /// <summary>The manifest of `name`; null when there is none, it is not a regular file (never followed or opened), or not JSON.</summary>
        private JObject ReadManifest(string name)
        {
            if (!Directory.Exists(Folder)) return null;
            byte[] bytes;
            using (ConfinedFolder folder = ConfinedFolder.Open(Folder, false)) bytes = folder.ReadSmall(name + ".json", MaxManifestBytes);
            if (bytes == null) return null;
            try
            {
                return JObject.Parse(Encoding.UTF8.GetString(bytes));
            }
            catch (JsonException)
            {
                return null;
            }
        }

        private string PartialFolder
        {
            get { return Path.Combine(Folder, ".partial"); }
        }
    }
}
