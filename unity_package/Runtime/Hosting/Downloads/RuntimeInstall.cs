using System;
using System.IO;
using CoreAI.Launcher;

namespace CoreAI.Downloads
{
    /// <summary>
    /// Where a fetched runtime goes and when it takes over. A runtime folder that a running runtime uses is never swapped
    /// under it: the new one is installed beside it as `&lt;folder&gt;.pending` and takes the folder's place at the
    /// runtime's next start, when the launcher has stopped the old one (the settings digest includes the version, pending
    /// one included, so the next start does replace it). Each installed runtime carries its version in
    /// `coreai-runtime.version` (the release tag and the archive's sha256).
    /// </summary>
    public static class RuntimeInstall
    {
        /// <summary>The file in a runtime folder that says which release it is.</summary>
        public const string VersionFileName = "coreai-runtime.version";

        /// <summary>The suffix of a runtime waiting to replace the folder it is named after.</summary>
        public const string PendingSuffix = ".pending";

        /// <summary>The version recorded in `folder`, or null (a runtime built by hand, or none).</summary>
        public static string RecordedVersion(string folder)
        {
            try
            {
                string file = Path.Combine(folder ?? "", VersionFileName);
                return File.Exists(file) ? File.ReadAllText(file).Trim() : null;
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException || e is ArgumentException)
            {
                return null;
            }
        }

        /// <summary>
        /// What the executable at `exe` counts as in the settings digest: the version of the runtime that will run next
        /// (a pending one when it waits), else the recorded one, else the file's size and modification time (a runtime
        /// built by hand and copied over the old one is a new version too). "" when `exe` is not a file.
        /// </summary>
        public static string VersionOf(string exe)
        {
            if (string.IsNullOrEmpty(exe) || !File.Exists(exe)) return "";
            string folder = Path.GetDirectoryName(Path.GetFullPath(exe));
            string pending = RecordedVersion(folder + PendingSuffix);
            if (pending != null && File.Exists(Path.Combine(folder + PendingSuffix, Path.GetFileName(exe)))) return "pending " + pending;
            string recorded = RecordedVersion(folder);
            if (recorded != null) return recorded;
            FileInfo info = new FileInfo(exe);
            return info.Length + "@" + info.LastWriteTimeUtc.Ticks;
        }

        /// <summary>The folder whose runtime runs next: `&lt;folder&gt;.pending` while one waits, else `folder` (what a build copies).</summary>
        public static string Current(string folder)
        {
            if (string.IsNullOrEmpty(folder)) return folder;
            string pending = folder.TrimEnd('/', '\\') + PendingSuffix;
            return Directory.Exists(pending) ? pending : folder;
        }

        /// <summary>
        /// Puts the freshly extracted `staged` folder in place of `folder`: at once when `inUse` is false (true), else
        /// as `folder.pending` for the next start (false).
        /// </summary>
        public static bool Install(string staged, string folder, bool inUse)
        {
            string target = folder.TrimEnd('/', '\\');
            if (inUse || !TrySwap(staged, target))
            {
                string pending = target + PendingSuffix;
                if (Directory.Exists(pending)) Directory.Delete(pending, true);
                Directory.Move(staged, pending);
                return false;
            }
            return true;
        }

        /// <summary>
        /// Replaces `folder` by its pending runtime if one waits: true when it did. Called by the launcher right before it
        /// starts a runtime from `folder`, when nothing of ours runs from it. Throws IOException when the folder is still
        /// in use (Windows refuses to move it then); the pending runtime keeps waiting.
        /// </summary>
        public static bool PromotePending(string folder)
        {
            if (string.IsNullOrEmpty(folder)) return false;
            string target = folder.TrimEnd('/', '\\');
            string pending = target + PendingSuffix;
            if (!Directory.Exists(pending)) return false;
            if (!TrySwap(pending, target)) throw new IOException("the folder " + Path.GetFileName(target) + " is in use");
            return true;
        }

        /// <summary>`source` becomes `target`; the old target is moved aside first and deleted after. False when the old one could not be moved.</summary>
        private static bool TrySwap(string source, string target)
        {
            string old = target + ".old";
            if (Directory.Exists(old)) Directory.Delete(old, true);
            if (Directory.Exists(target))
            {
                try
                {
                    Directory.Move(target, old);
                }
                catch (IOException)
                {
                    return false;  // Windows: a file in it is open (a runtime runs from it)
                }
                catch (UnauthorizedAccessException)
                {
                    return false;
                }
            }
            Directory.Move(source, target);
            try
            {
                if (Directory.Exists(old)) Directory.Delete(old, true);
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                // A leftover the next install removes.
            }
            return true;
        }
    }
}
