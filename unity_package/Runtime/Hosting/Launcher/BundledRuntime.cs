using System;
using System.Collections.Generic;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The frozen runtime inside a player build (`tools/build_runtime.py` makes it, one folder per OS):
    /// where a build step copies it (`StreamingAssets/CoreAI/runtime`, the model to `StreamingAssets/CoreAI/models`),
    /// and how a player finds it again. Plain C#: the editor's build step and the player both use it.
    /// </summary>
    public static class BundledRuntime
    {
        /// <summary>The folder under StreamingAssets that holds everything CoreAI ships.</summary>
        public const string Folder = "CoreAI";

        /// <summary>The runtime's folder inside <see cref="Folder"/>.</summary>
        public const string RuntimeFolderName = "runtime";

        /// <summary>The models' folder inside <see cref="Folder"/>.</summary>
        public const string ModelsFolderName = "models";

        /// <summary>The `serve --config` file inside <see cref="Folder"/>: settings a server operator may edit without a rebuild.</summary>
        public const string ConfigFileName = "coreai-runtime.json";

        /// <summary>The platform (`windows`, `macos`, `linux`) of a Unity BuildTarget name; null when the target cannot start processes.</summary>
        public static string PlatformOf(string buildTarget)
        {
            switch (buildTarget ?? "")
            {
                case "StandaloneWindows":
                case "StandaloneWindows64":
                    return "windows";
                case "StandaloneOSX":
                    return "macos";
                case "StandaloneLinux64":
                case "LinuxHeadlessSimulation":
                    return "linux";
                default:
                    return null; // Android, iOS, WebGL, consoles: remote mode, nothing to bundle
            }
        }

        /// <summary>The runtime executable's file name on `platform`.</summary>
        public static string ExecutableName(string platform)
        {
            return platform == "windows" ? "coreai-runtime.exe" : "coreai-runtime";
        }

        /// <summary>
        /// The StreamingAssets folder of a player that Unity built at `outputPath`: `&lt;Game&gt;_Data/StreamingAssets` next
        /// to the executable on Windows and Linux, `&lt;Game&gt;.app/Contents/Resources/Data/StreamingAssets` on macOS.
        /// </summary>
        public static string StreamingAssetsOf(string platform, string outputPath)
        {
            if (string.IsNullOrEmpty(outputPath)) throw new ArgumentException("the build has no output path");
            string output = outputPath.TrimEnd('/', '\\');
            if (platform == "macos")
                return Path.Combine(Path.Combine(Path.Combine(Path.Combine(output, "Contents"), "Resources"), "Data"), "StreamingAssets");
            string folder = Path.GetDirectoryName(output) ?? "";
            return Path.Combine(Path.Combine(folder, Path.GetFileNameWithoutExtension(output) + "_Data"), "StreamingAssets");
        }

        /// <summary>
        /// Copies the frozen runtime of `platform` (the folder tools/build_runtime.py made on that OS) and, when given,
        /// the GGUF `modelFile` into `streamingAssets/CoreAI/`. Throws BundledRuntimeException naming what is missing,
        /// before anything is copied. `buildTarget` only names the target in messages.
        /// </summary>
        public static BundleResult CopyInto(string buildTarget, string platform, string runtimeFolder, string modelFile, string streamingAssets)
        {
            return CopyInto(buildTarget, platform, runtimeFolder, modelFile, streamingAssets, null);
        }

        /// <summary>
        /// CopyInto, then writes `serveConfig` (serve settings by their --config keys, e.g. "session_only") to
        /// `streamingAssets/CoreAI/coreai-runtime.json`, with "model" naming the bundled model relative to that file.
        /// </summary>
        public static BundleResult CopyInto(string buildTarget, string platform, string runtimeFolder, string modelFile, string streamingAssets,
            IDictionary<string, object> serveConfig)
        {
            string exeName = ExecutableName(platform);
            runtimeFolder = CoreAI.Downloads.RuntimeInstall.Current(runtimeFolder);  // a fetched runtime waiting for the editor's next start
            if (string.IsNullOrEmpty(runtimeFolder) || !Directory.Exists(runtimeFolder))
                throw new BundledRuntimeException("CoreAI: no runtime for " + buildTarget + " builds: the folder '" + runtimeFolder
                    + "' is missing. Build it on " + platform + " with `python tools/build_runtime.py` and copy dist/coreai-runtime/ there "
                    + "(CoreAIRuntimeSettings > Bundled runtime), or turn Bundle Runtime In Builds off (remote mode).");
            if (!File.Exists(Path.Combine(runtimeFolder, exeName)))
                throw new BundledRuntimeException("CoreAI: the runtime folder '" + runtimeFolder + "' for " + buildTarget
                    + " builds has no " + exeName + ": it must hold the whole dist/coreai-runtime/ folder built on " + platform + ".");
            if (!string.IsNullOrEmpty(modelFile) && !File.Exists(modelFile))
                throw new BundledRuntimeException("CoreAI: the model file '" + modelFile + "' (CoreAIRuntimeSettings > Model) is missing.");

            string root = Path.Combine(streamingAssets, Folder);
            string target = Path.Combine(root, RuntimeFolderName);
            if (Directory.Exists(target)) Directory.Delete(target, true); // a previous build's runtime, maybe another version
            int count = CopyFolder(runtimeFolder, target);
            // The player runs these: with their executable bit, also when the project's copy lost it (built on Windows,
            // checked out of Perforce). Set here where the build machine can (Linux, macOS); the launcher does it again.
            if (platform != "windows" && ExecutableBits.RestoreFolder(target, exeName) != null)
                throw new BundledRuntimeException("CoreAI: the runtime copied into the build is not executable and could not be made so "
                    + "(chmod failed, errno " + Posix.LastError + ")");
            string copiedModel = null;
            if (!string.IsNullOrEmpty(modelFile))
            {
                string models = Path.Combine(root, ModelsFolderName);
                Directory.CreateDirectory(models);
                copiedModel = Path.Combine(models, Path.GetFileName(modelFile));
                File.Copy(modelFile, copiedModel, true);
                count++;
            }
            BundleResult result = new BundleResult(platform, streamingAssets, target, Path.Combine(target, exeName), copiedModel, count);
            if (serveConfig != null)
            {
                var config = new Dictionary<string, object>(serveConfig);
                if (copiedModel != null) config["model"] = ModelsFolderName + "/" + Path.GetFileName(copiedModel);
                result.ConfigFile = Path.Combine(root, ConfigFileName);
                File.WriteAllText(result.ConfigFile, Newtonsoft.Json.JsonConvert.SerializeObject(config, Newtonsoft.Json.Formatting.Indented));
            }
            return result;
        }

        /// <summary>
        /// In a player: points `options` at the bundled runtime under `streamingAssetsPath` (and at the bundled copy
        /// of its model, matched by file name) when the build carries one; returns true when it did.
        /// </summary>
        public static bool UseBundled(RuntimeLaunchOptions options, string streamingAssetsPath)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            if (string.IsNullOrEmpty(streamingAssetsPath)) return false;
            string root = Path.Combine(streamingAssetsPath, Folder);
            string exe = Path.Combine(Path.Combine(root, RuntimeFolderName), ExecutableName(Platform.IsWindows ? "windows" : "other"));
            if (!File.Exists(exe)) return false;
            options.RuntimePath = exe;
            options.RuntimeArguments = new List<string>();
            string config = Path.Combine(root, ConfigFileName);
            if (File.Exists(config)) options.ConfigPath = config;
            if (!string.IsNullOrEmpty(options.ModelPath))
            {
                string bundledModel = Path.Combine(Path.Combine(root, ModelsFolderName), Path.GetFileName(options.ModelPath));
                if (File.Exists(bundledModel)) options.ModelPath = bundledModel;
            }
            return true;
        }

        private static int CopyFolder(string source, string target)
        {
            Directory.CreateDirectory(target);
            int count = 0;
            foreach (string file in Directory.GetFiles(source))
            {
                string copy = Path.Combine(target, Path.GetFileName(file));
                if (CopyLink(file, copy))
                {
                    count++;
                    continue;
                }
                // File.Copy keeps the Unix mode bits (Mono and .NET both); the launcher restores a lost executable bit anyway.
                File.Copy(file, copy, true);
                count++;
            }
            foreach (string folder in Directory.GetDirectories(source))
            {
                string copy = Path.Combine(target, Path.GetFileName(folder));
                if (CopyLink(folder, copy)) count++;
                else count += CopyFolder(folder, copy);
            }
            return count;
        }

        /// <summary>
        /// A symbolic link is copied as the same link (relative stays relative), never as what it points at: a macOS
        /// framework whose Versions/Current and top-level links became copies no longer passes codesign, and a
        /// followed link duplicates libraries. False when `source` is no link (or links cannot be made here: Windows).
        /// </summary>
        private static bool CopyLink(string source, string copy)
        {
            if (Platform.IsWindows || (File.GetAttributes(source) & FileAttributes.ReparsePoint) == 0) return false;
            string target = Posix.ReadLink(source);
            if (target == null) return false;
            if (File.Exists(copy)) File.Delete(copy);
            if (Posix.Symlink(target, copy) != 0)
                throw new IOException("cannot copy the symbolic link " + Path.GetFileName(source) + " (errno " + Posix.LastError + ")");
            return true;
        }
    }
}
