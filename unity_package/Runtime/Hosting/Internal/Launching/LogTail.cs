using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>Reads the last lines of the runtime's log for error messages.</summary>
    internal static class LogTail
    {
        private const int MaxBytes = 16 * 1024;

        /// <summary>The last `lines` lines of the file at `path` ("" when it is missing or empty).</summary>
        public static string Read(string path, int lines)
        {
            try
            {
                if (!File.Exists(path)) return "";
                using (FileStream stream = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete))
                {
                    long start = Math.Max(0, stream.Length - MaxBytes);
                    stream.Seek(start, SeekOrigin.Begin);
                    byte[] buffer = new byte[stream.Length - start];
                    int read = 0;
                    while (read < buffer.Length)
                    {
                        int n = stream.Read(buffer, read, buffer.Length - read);
                        if (n <= 0) break;
                        read += n;
                    }
                    string text = Encoding.UTF8.GetString(buffer, 0, read);
                    string[] all = text.Replace("\r\n", "\n").TrimEnd('\n').Split('\n');
                    int first = start > 0 ? 1 : 0; // the first line of a cut read may be partial
                    List<string> tail = new List<string>();
                    for (int i = Math.Max(first, all.Length - lines); i < all.Length; i++) tail.Add(all[i]);
                    return string.Join("\n", tail.ToArray());
                }
            }
            catch (IOException)
            {
                return "";
            }
            catch (UnauthorizedAccessException)
            {
                return "";
            }
        }
    }
}
