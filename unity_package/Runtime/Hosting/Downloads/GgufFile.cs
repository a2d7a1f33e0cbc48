using System;
using System.IO;

namespace CoreAI.Downloads
{
    /// <summary>The first bytes of a GGUF model file: enough to refuse an HTML error page or a truncated header before a load fails.</summary>
    public static class GgufFile
    {
        /// <summary>Throws DownloadException (NotUsable) unless `path` starts with a GGUF header of version 2 or later.</summary>
        public static void Check(string path)
        {
            byte[] header = new byte[24];
            int read;
            using (FileStream stream = File.OpenRead(path))
            {
                read = stream.Read(header, 0, header.Length);
            }
            if (read < header.Length || header[0] != 'G' || header[1] != 'G' || header[2] != 'U' || header[3] != 'F')
                throw new DownloadException(DownloadFailure.NotUsable, "not a GGUF model file (bad magic)");
            uint version = BitConverter.ToUInt32(header, 4); // GGUF is little-endian, as every desktop CPU Unity targets
            if (version < 2) throw new DownloadException(DownloadFailure.NotUsable, "GGUF version " + version + " is not supported (need 2 or later)");
        }
    }
}
