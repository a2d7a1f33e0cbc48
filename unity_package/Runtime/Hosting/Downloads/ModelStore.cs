using System;
using System.Collections.Generic;
using System.IO;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
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

        /// <summary>Where the model `name` lives, pulled or not.</summary>
        public string PathOf(string name)
        {
            return Path.Combine(Folder, CheckName(name) + ".gguf");
        }

        /// <summary>True when `name` is pulled and its file still has the recorded size.</summary>
        public bool IsPulled(string name)
        {
            string manifest = Path.Combine(Folder, CheckName(name) + ".json");
            string model = PathOf(name);
            try
            {
                if (!File.Exists(manifest) || !File.Exists(model)) return false;
                JObject data = JObject.Parse(File.ReadAllText(manifest));
                return data["size_bytes"] != null && (long)data["size_bytes"] == new FileInfo(model).Length;
            }
            catch (Exception e) when (e is IOException || e is JsonException || e is FormatException || e is ArgumentException || e is InvalidCastException)
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
            return Path.Combine(Path.Combine(Folder, ".partial"), CheckName(name) + ".gguf.partial");
        }

        /// <summary>Deletes what a paused or interrupted pull of `name` kept (a pull given up for good leaves nothing).</summary>
        public void DiscardPartial(string name)
        {
            string partial = PartialPathOf(name);
            try
            {
                if (File.Exists(partial)) File.Delete(partial);
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                // Held by a download still stopping: that download deletes it when it was cancelled.
            }
        }

        /// <summary>Deletes the model `name` (file, manifest, partial download); false when there was nothing.</summary>
        public bool Remove(string name)
        {
            string checkedName = CheckName(name);
            bool removed = false;
            foreach (string path in new[] { Path.Combine(Folder, checkedName + ".json"), PathOf(checkedName),
                         PartialPathOf(checkedName) })
            {
                if (!File.Exists(path)) continue;
                File.Delete(path);
                removed = true;
            }
            return removed;
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
            string manifest = Path.Combine(Folder, name + ".json");
            if (IsPulled(name) && (string.IsNullOrEmpty(sha256) || string.Equals(RecordedSha256(manifest), sha256, StringComparison.OrdinalIgnoreCase)))
                return model;
            DownloadRequest request = new DownloadRequest
            {
                Url = url,
                Destination = model,
                PartialFolder = Path.Combine(Folder, ".partial"),
                Sha256 = sha256,
                Size = size,
                Validate = GgufFile.Check,
                Label = name,
                Pause = pause,
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
            string temp = manifest + ".tmp";
            File.WriteAllText(temp, data.ToString(Formatting.Indented) + "\n");
            if (File.Exists(manifest)) File.Replace(temp, manifest, null);
            else File.Move(temp, manifest);
            return model;
        }

        private static string RecordedSha256(string manifest)
        {
            try
            {
                return (string)JObject.Parse(File.ReadAllText(manifest))["sha256"];
            }
            catch (Exception e) when (e is IOException || e is JsonException || e is InvalidCastException)
            {
                return null;
            }
        }
    }
}
