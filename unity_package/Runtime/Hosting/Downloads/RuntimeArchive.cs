using System;
using System.IO;
using System.Net;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Downloads
{
    /// <summary>
    /// The frozen runtime as the release workflow publishes it for a tag (.github/workflows/release.yml,
    /// tools/package_runtime.py): `coreai-runtime-&lt;os&gt;-&lt;arch&gt;.tar.gz` holding the `coreai-runtime/` folder, and
    /// `….tar.gz.sha256` beside it, for linux-x64, windows-x64, macos-arm64 and macos-x64. Fetch downloads the archive
    /// with the models' downloader (resume, checksum), extracts it next to the target (file modes from the archive, so
    /// `coreai-runtime` and `llama-server` are executable), records its version, and installs it through
    /// <see cref="RuntimeInstall"/>: swapped in at once when no runtime runs from the target folder, else beside it for
    /// the next start. The target folder is the old runtime or the whole new one, never a mix.
    /// </summary>
    public static class RuntimeArchive
    {
        /// <summary>The archives a release publishes, as `os-arch`.</summary>
        public static readonly string[] Released = { "linux-x64", "windows-x64", "macos-arm64", "macos-x64" };
        /// <summary>The folder inside the archive (dropped on extraction).</summary>
        public const string TopFolder = "coreai-runtime";

        /// <summary>`coreai-runtime-linux-x64.tar.gz` for ("linux", "x64"); os is windows, macos or linux, arch x64 or arm64.</summary>
        public static string ArchiveName(string os, string arch)
        {
            if (os != "windows" && os != "macos" && os != "linux") throw new ArgumentException("the runtime is built for windows, macos and linux, not " + os);
            if (arch != "x64" && arch != "arm64") throw new ArgumentException("the runtime is built for x64 and arm64, not " + arch);
            return "coreai-runtime-" + os + "-" + arch + ".tar.gz";
        }

        /// <summary>
        /// The archive for this machine's OS and real CPU (x64 or arm64; null when no archive fits). On macOS an x64
        /// editor under Rosetta 2 reports x64, yet the machine is Apple Silicon (sysctl.proc_translated = 1): it gets the
        /// arm64 runtime, which macOS runs natively (and with Metal) whatever the editor is.
        /// </summary>
        public static string HostArch(string os)
        {
            string osArch = RuntimeInformation.OSArchitecture == Architecture.Arm64 ? "arm64"
                : RuntimeInformation.OSArchitecture == Architecture.X64 ? "x64" : null;
            return PickArch(os, osArch, os == "macos" && MacIsTranslated());
        }

        /// <summary>
        /// The archive's CPU for `os` on a machine whose OS reports `osArch` (x64, arm64, or null), `translated` when the
        /// process runs under Rosetta 2. Windows on ARM runs the x64 runtime (emulated; no arm64 archive is released).
        /// Null when no released archive fits (e.g. Linux on arm64, a 32-bit OS).
        /// </summary>
        public static string PickArch(string os, string osArch, bool translated)
        {
            string arch = translated ? "arm64" : osArch;
            if (os == "windows" && arch == "arm64") arch = "x64";
            return arch != null && Array.IndexOf(Released, os + "-" + arch) >= 0 ? arch : null;
        }

        private static bool MacIsTranslated()
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_OSX || (UNITY_STANDALONE_OSX && !UNITY_EDITOR)
            try
            {
                return CoreAI.Launcher.Platform.IsMac && CoreAI.Launcher.MacLibc.IsTranslated();
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException)
            {
                return false;
            }
#else
            return false;
#endif
        }

        /// <summary>
        /// The release download folder for the package installed from `gitUrl` (the URL in Packages/manifest.json):
        /// `https://github.com/OWNER/REPO.git?path=unity_package#v0.2.0` gives `https://github.com/OWNER/REPO/releases/download/v0.2.0`.
        /// Without a `#tag`, `v` + `packageVersion` is used. Null when the URL is not a GitHub repository.
        /// </summary>
        public static string ReleaseBaseUrl(string gitUrl, string packageVersion)
        {
            if (string.IsNullOrEmpty(gitUrl)) return null;
            Match match = Regex.Match(gitUrl.Trim(), @"^(?:git\+)?(?:https://|ssh://git@|git@)github\.com[/:]([\w.-]+)/([\w.-]+?)(?:\.git)?(?:\?[^#]*)?(?:#(.+))?$");
            if (!match.Success) return null;
            string tag = match.Groups[3].Success ? match.Groups[3].Value : (string.IsNullOrEmpty(packageVersion) ? null : "v" + packageVersion);
            if (tag == null) return null;
            return "https://github.com/" + match.Groups[1].Value + "/" + match.Groups[2].Value + "/releases/download/" + Uri.EscapeDataString(tag);
        }

        /// <summary>
        /// Downloads `ArchiveName(os, arch)` from `releaseBaseUrl`, checks it against the published `.sha256`, and installs
        /// its `coreai-runtime/` folder as `targetFolder`: now, or, when `inUse` says a runtime runs from there, beside it
        /// for the next start. Throws DownloadException. `pause` stops it keeping the download for the next fetch.
        /// </summary>
        public static Task<FetchedRuntime> FetchAsync(string releaseBaseUrl, string os, string arch, string targetFolder,
            IProgress<DownloadProgress> progress, CancellationToken cancellation, Func<string, bool> inUse = null,
            CancellationToken pause = default(CancellationToken))
        {
            return Task.Run(() => Fetch(releaseBaseUrl, os, arch, targetFolder, progress, cancellation, inUse, pause));
        }

        private static FetchedRuntime Fetch(string releaseBaseUrl, string os, string arch, string targetFolder,
            IProgress<DownloadProgress> progress, CancellationToken cancellation, Func<string, bool> inUse, CancellationToken pause)
        {
            string name = ArchiveName(os, arch);
            string baseUrl = (releaseBaseUrl ?? "").TrimEnd('/');
            string target = Path.GetFullPath(targetFolder);
            string parent = Path.GetDirectoryName(target);
            string downloads = Path.Combine(parent, ".downloads");
            string sha256 = PublishedSha256(baseUrl + "/" + name + ".sha256", name);
            string archive = Path.Combine(downloads, name);
            FileDownloader.Download(new DownloadRequest
            {
                Url = baseUrl + "/" + name,
                Destination = archive,
                Sha256 = sha256,
                Label = name,
                Validate = CheckGzip,
                Pause = pause,
            }, progress, cancellation);

            string staging = Path.Combine(parent, "." + Path.GetFileName(target) + ".extracting");
            if (Directory.Exists(staging)) Directory.Delete(staging, true);
            try
            {
                TarGzArchive.Extract(archive, staging, 1);
                string exe = os == "windows" ? "coreai-runtime.exe" : "coreai-runtime";
                if (!File.Exists(Path.Combine(staging, exe)))
                    throw new DownloadException(DownloadFailure.NotUsable, name + " has no " + TopFolder + "/" + exe + ": not a runtime archive");
                string version = TagOf(baseUrl) + " " + name + " sha256:" + sha256;
                File.WriteAllText(Path.Combine(staging, RuntimeInstall.VersionFileName), version + "\n");
                bool now = RuntimeInstall.Install(staging, target, inUse != null && inUse(target));
                File.Delete(archive);
                return new FetchedRuntime(Path.Combine(target, exe), version, !now);
            }
            finally
            {
                if (Directory.Exists(staging)) Directory.Delete(staging, true);
            }
        }

        /// <summary>The sha256 in a `sha256sum`-style file (`HEX  NAME`), fetched over HTTP(S).</summary>
        private static string PublishedSha256(string url, string name)
        {
            HttpWebRequest web = (HttpWebRequest)WebRequest.Create(url);
            web.Timeout = 30000;
            web.ReadWriteTimeout = 30000;
            web.KeepAlive = false;
            string text;
            try
            {
                using (WebResponse response = web.GetResponse())
                using (StreamReader reader = new StreamReader(response.GetResponseStream()))
                {
                    char[] buffer = new char[4096];
                    int n = reader.ReadBlock(buffer, 0, buffer.Length);
                    text = new string(buffer, 0, n);
                }
            }
            catch (WebException e)
            {
                HttpWebResponse failed = e.Response as HttpWebResponse;
                if (failed != null && (int)failed.StatusCode == 404)
                    throw new DownloadException(DownloadFailure.NotFound, "no runtime " + name + " in the release at " + FileDownloader.PublicUrl(url)
                        + " (HTTP 404): the release may not have this OS/CPU, or the tag does not exist");
                throw new DownloadException(DownloadFailure.HttpError, "the checksum of " + name + " could not be fetched (" + e.Status + ")");
            }
            Match match = Regex.Match(text, @"^\s*([0-9a-fA-F]{64})\b");
            if (!match.Success) throw new DownloadException(DownloadFailure.NotUsable, FileDownloader.PublicUrl(url) + " holds no sha256");
            return match.Groups[1].Value.ToLowerInvariant();
        }

        private static void CheckGzip(string path)
        {
            byte[] magic = new byte[2];
            using (FileStream stream = File.OpenRead(path))
            {
                if (stream.Read(magic, 0, 2) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
                    throw new DownloadException(DownloadFailure.NotUsable, "not a .tar.gz archive");
            }
        }

        /// <summary>Deletes what a paused or interrupted fetch of the `os`/`arch` archive for `targetFolder` kept.</summary>
        public static void DiscardDownload(string targetFolder, string os, string arch)
        {
            string partial = Path.Combine(Path.Combine(Path.GetDirectoryName(Path.GetFullPath(targetFolder)), ".downloads"),
                ArchiveName(os, arch) + ".partial");
            try
            {
                if (File.Exists(partial)) File.Delete(partial);
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                // Still held by a fetch that is stopping: the cancelled fetch deletes it itself.
            }
        }

        private static string TagOf(string baseUrl)
        {
            int slash = baseUrl.LastIndexOf('/');
            return Uri.UnescapeDataString(slash >= 0 ? baseUrl.Substring(slash + 1) : baseUrl);
        }
    }
}
