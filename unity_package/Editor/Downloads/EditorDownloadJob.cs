using Newtonsoft.Json;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// A download the editor runs for the project, as kept in SessionState across domain reloads: everything needed to
    /// resume it and to apply its result to the settings asset, nothing of Unity's objects.
    /// </summary>
    internal sealed class EditorDownloadJob
    {
        public const string ModelKind = "model";
        public const string RuntimeKind = "runtime";

        [JsonProperty("kind")] public string Kind;
        [JsonProperty("settingsPath")] public string SettingsPath;
        [JsonProperty("projectRoot")] public string ProjectRoot;
        [JsonProperty("attempts")] public int Attempts;

        // A model pull.
        [JsonProperty("model")] public string ModelName;
        [JsonProperty("url")] public string Url;
        [JsonProperty("sha256")] public string Sha256;
        [JsonProperty("size")] public long Size;
        [JsonProperty("fileName")] public string FileName;
        [JsonProperty("license")] public string License;

        // A runtime fetch.
        [JsonProperty("os")] public string Os;
        [JsonProperty("arch")] public string Arch;
        [JsonProperty("releaseBaseUrl")] public string ReleaseBaseUrl;
        [JsonProperty("editorOs")] public string EditorOs;
        [JsonProperty("persistentDataPath")] public string PersistentDataPath;

        /// <summary>What it downloads, for status lines.</summary>
        [JsonIgnore]
        public string Label
        {
            get { return Kind == ModelKind ? ModelName : "the " + Os + "-" + Arch + " runtime"; }
        }
    }
}
