using System;
using System.Collections.Generic;
using System.IO;
using System.IO.Compression;
using System.Text;
using CoreAI.Launcher;

namespace CoreAI.Downloads
{
    /// <summary>
    /// Extracts a .tar.gz (ustar, pax and GNU long names; files, folders, symlinks) as tools/package_runtime.py writes
    /// it. GZipStream is in System.dll at both Unity API levels; no zip library is needed. Entries that would land
    /// outside the target (absolute paths, `..`, links pointing out) are refused. On Linux and macOS each file gets the
    /// permission bits its entry carries and each symbolic link is made as a link, through chmod(2) and symlink(2)
    /// (P/Invoke, nothing spawned), so `coreai-runtime` and `llama-server` stay executable and a macOS bundle keeps its
    /// links (copies would break its code signature).
    /// </summary>
    public static class TarGzArchive
    {
        private const int Block = 512;

        /// <summary>Extracts `archive` into `target` (created), dropping the first `stripComponents` path parts; returns the files written.</summary>
        public static int Extract(string archive, string target, int stripComponents)
        {
            Directory.CreateDirectory(target);
            string root = Path.GetFullPath(target);
            var modes = new List<KeyValuePair<string, int>>();
            var links = new List<KeyValuePair<string, string>>();
            int files = 0;
            using (FileStream raw = File.OpenRead(archive))
            using (GZipStream gz = new GZipStream(raw, CompressionMode.Decompress))
            {
                string longName = null, longLink = null, paxPath = null, paxLink = null;
                long paxSize = -1;
                byte[] header = new byte[Block];
                while (ReadFull(gz, header, Block))
                {
                    if (IsZero(header)) break;
                    char type = (char)header[156];
                    long size = paxSize >= 0 ? paxSize : ParseSize(header, 124, 12);
                    string name = paxPath ?? longName ?? Combine(Text(header, 345, 155), Text(header, 0, 100));
                    string link = paxLink ?? longLink ?? Text(header, 157, 100);
                    int mode = (int)ParseOctal(header, 100, 8);
                    if (type == 'L' || type == 'K' || type == 'x' || type == 'g')
                    {
                        byte[] data = ReadData(gz, size);
                        string value = Encoding.UTF8.GetString(data).TrimEnd('\0');
                        if (type == 'L') longName = value;
                        else if (type == 'K') longLink = value;
                        else if (type == 'x') ParsePax(value, ref paxPath, ref paxLink, ref paxSize);
                        continue;
                    }
                    longName = longLink = paxPath = paxLink = null;
                    paxSize = -1;
                    string relative = Strip(name, stripComponents);
                    if (relative == null)
                    {
                        Skip(gz, size);
                        continue;
                    }
                    string path = Inside(root, relative, name);
                    if (type == '5')
                    {
                        Directory.CreateDirectory(path);
                    }
                    else if (type == '2')
                    {
                        Inside(root, Path.Combine(Path.GetDirectoryName(relative) ?? "", link), name); // a link may not point out
                        links.Add(new KeyValuePair<string, string>(path, link));
                    }
                    else if (type == '0' || type == '\0' || type == '7')
                    {
                        Directory.CreateDirectory(Path.GetDirectoryName(path));
                        using (FileStream file = File.Create(path)) Copy(gz, file, size);
                        files++;
                        if ((mode & 0x100) != 0) modes.Add(new KeyValuePair<string, int>(path, mode & 0x1FF));  // rwx bits, when readable
                    }
                    else
                    {
                        Skip(gz, size); // hard links, devices, fifos: nothing a runtime needs
                    }
                    Pad(gz, size);
                }
            }
            if (!IsWindows())
            {
                foreach (KeyValuePair<string, string> link in links) MakeLink(link.Value, link.Key);
                foreach (KeyValuePair<string, int> file in modes)
                {
                    if (Posix.Chmod(file.Key, file.Value) != 0)
                        throw new DownloadException(DownloadFailure.NotUsable, "cannot set the permissions of " + Path.GetFileName(file.Key)
                            + " while extracting the runtime (errno " + Posix.LastError + ")");
                }
            }
            return files;
        }

        private static string Strip(string name, int count)
        {
            string[] parts = name.Replace('\\', '/').Split(new[] { '/' }, StringSplitOptions.RemoveEmptyEntries);
            var kept = new List<string>();
            for (int i = 0; i < parts.Length; i++)
            {
                if (parts[i] == ".") continue;
                kept.Add(parts[i]);
            }
            if (kept.Count <= count) return null;
            return string.Join("/", kept.GetRange(count, kept.Count - count).ToArray());
        }

        private static string Inside(string root, string relative, string entry)
        {
            if (relative.StartsWith("/", StringComparison.Ordinal) || Path.IsPathRooted(relative) || relative.Contains(":"))
                throw new DownloadException(DownloadFailure.NotUsable, "the archive entry '" + entry + "' has an absolute path");
            string full = Path.GetFullPath(Path.Combine(root, relative.Replace('/', Path.DirectorySeparatorChar)));
            string prefix = root.EndsWith(Path.DirectorySeparatorChar.ToString(), StringComparison.Ordinal) ? root : root + Path.DirectorySeparatorChar;
            if (full != root && !full.StartsWith(prefix, StringComparison.Ordinal))
                throw new DownloadException(DownloadFailure.NotUsable, "the archive entry '" + entry + "' points outside the folder it is extracted to");
            return full;
        }

        private static void ParsePax(string records, ref string path, ref string link, ref long size)
        {
            foreach (string line in records.Split('\n'))
            {
                int space = line.IndexOf(' ');
                int equals = line.IndexOf('=');
                if (space < 0 || equals < space) continue;
                string key = line.Substring(space + 1, equals - space - 1);
                string value = line.Substring(equals + 1);
                if (key == "path") path = value;
                else if (key == "linkpath") link = value;
                else if (key == "size") long.TryParse(value, out size);
            }
        }

        private static string Combine(string prefix, string name)
        {
            return prefix.Length > 0 ? prefix + "/" + name : name;
        }

        private static string Text(byte[] header, int offset, int length)
        {
            int end = offset;
            while (end < offset + length && header[end] != 0) end++;
            return Encoding.UTF8.GetString(header, offset, end - offset);
        }

        private static long ParseSize(byte[] header, int offset, int length)
        {
            if ((header[offset] & 0x80) != 0) // base-256, for entries over 8 GB
            {
                long value = header[offset] & 0x7f;
                for (int i = offset + 1; i < offset + length; i++) value = (value << 8) | header[i];
                return value;
            }
            return ParseOctal(header, offset, length);
        }

        private static long ParseOctal(byte[] header, int offset, int length)
        {
            long value = 0;
            for (int i = offset; i < offset + length; i++)
            {
                byte b = header[i];
                if (b == 0 || b == (byte)' ')
                {
                    if (value > 0) break;
                    continue;
                }
                if (b < (byte)'0' || b > (byte)'7') throw new DownloadException(DownloadFailure.NotUsable, "the archive is corrupt (a bad tar header)");
                value = value * 8 + (b - (byte)'0');
            }
            return value;
        }

        private static bool IsZero(byte[] header)
        {
            foreach (byte b in header)
                if (b != 0) return false;
            return true;
        }

        private static bool ReadFull(Stream stream, byte[] buffer, int count)
        {
            int got = 0;
            while (got < count)
            {
                int n = stream.Read(buffer, got, count - got);
                if (n <= 0)
                {
                    if (got == 0) return false;
                    throw new DownloadException(DownloadFailure.NotUsable, "the archive is truncated");
                }
                got += n;
            }
            return true;
        }

        private static byte[] ReadData(Stream stream, long size)
        {
            if (size > 1 << 20) throw new DownloadException(DownloadFailure.NotUsable, "the archive has an oversized metadata entry");
            byte[] data = new byte[size];
            if (size > 0) ReadFull(stream, data, (int)size);
            Pad(stream, size);
            return data;
        }

        private static void Copy(Stream source, Stream target, long size)
        {
            byte[] buffer = new byte[81920];
            long left = size;
            while (left > 0)
            {
                int n = source.Read(buffer, 0, (int)Math.Min(buffer.Length, left));
                if (n <= 0) throw new DownloadException(DownloadFailure.NotUsable, "the archive is truncated");
                target.Write(buffer, 0, n);
                left -= n;
            }
        }

        private static void Skip(Stream stream, long size)
        {
            Copy(stream, Stream.Null, size);
        }

        private static void Pad(Stream stream, long size)
        {
            long rest = (Block - size % Block) % Block;
            if (rest > 0) Copy(stream, Stream.Null, rest);
        }

        private static bool IsWindows()
        {
            return Environment.OSVersion.Platform == PlatformID.Win32NT;
        }

        private static void MakeLink(string target, string link)
        {
            if (File.Exists(link) || Directory.Exists(link)) File.Delete(link);
            if (Posix.Symlink(target, link) != 0)
                throw new DownloadException(DownloadFailure.NotUsable, "cannot make the symbolic link " + Path.GetFileName(link)
                    + " while extracting the runtime (errno " + Posix.LastError + ")");
        }
    }
}
