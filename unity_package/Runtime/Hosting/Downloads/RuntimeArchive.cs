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
    /// `….tar.gz.sha256` beside it. Fetch downloads the archive with the models' downloader (resume, checksum), extracts it
    /// next to the target and swaps it in, so the target folder is the old runtime or the whole new one, never a mix.
    /// </summary>
    public static class RuntimeArchive
    {
        /// <summary>The folder inside the archive (dropped on extraction).</summary>
        public const string TopFolder = "coreai-runtime";

        /// <summary>`coreai-runtime-linux-x64.tar.gz` for ("linux", "x64"); os is windows, macos or linux, arch x64 or arm64.</summary>
        public static string ArchiveName(string os, string arch)
        {
            if (os != "windows" && os != "macos" && os != "linux") throw new ArgumentException("the runtime is built for windows, macos and linux, not " + os);
            if (arch != "x64" && arch != "arm64") throw new ArgumentException("the runtime is built for x64 and arm64, not " + arch);
            return "coreai-runtime-" + os + "-" + arch + ".tar.gz";
        }

        /// <summary>This process's CPU as the archives name it: x64 or arm64 (null for others, e.g. 32-bit).</summary>
        public static string HostArch()
        {
            switch (RuntimeInformation.OSArchitecture)
            {
                case Architecture.X64:
                    return "x64";
                case Architecture.Arm64:
                    return "arm64";
                default:
                    return null;
            }
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
        /// Downloads `ArchiveName(os, arch)` from `releaseBaseUrl`, checks it against the published `.sha256`, and replaces
        /// `targetFolder` with its `coreai-runtime/` folder. The result is the runtime executable's path. Throws DownloadException.
        /// </summary>
        public static Task<string> FetchAsync(string releaseBaseUrl, string os, string arch, string targetFolder,
            IProgress<DownloadProgress> progress, CancellationToken cancellation)
        {
            return Task.Run(() => Fetch(releaseBaseUrl, os, arch, targetFolder, progress, cancellation), cancellation);
        }

        private static string Fetch(string releaseBaseUrl, string os, string arch, string targetFolder, IProgress<DownloadProgress> progress,
            CancellationToken cancellation)
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
            }, progress, cancellation);

            string staging = Path.Combine(parent, "." + Path.GetFileName(target) + ".extracting");
            if (Directory.Exists(staging)) Directory.Delete(staging, true);
            try
            {
                TarGzArchive.Extract(archive, staging, 1);
                string exe = os == "windows" ? "coreai-runtime.exe" : "coreai-runtime";
                if (!File.Exists(Path.Combine(staging, exe)))
                    throw new DownloadException(DownloadFailure.NotUsable, name + " has no " + TopFolder + "/" + exe + ": not a runtime archive");
                Swap(staging, target);
                File.Delete(archive);
                return Path.Combine(target, exe);
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

        private static void Swap(string staging, string target)
        {
            string old = target + ".old";
            if (Directory.Exists(old)) Directory.Delete(old, true);
            if (Directory.Exists(target)) Directory.Move(target, old);
            Directory.Move(staging, target);
            if (Directory.Exists(old)) Directory.Delete(old, true);
        }
    }
}
