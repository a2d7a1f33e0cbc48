using System;
using System.Collections.Generic;
using System.Security.Cryptography;
using System.Text;
using System.Text.RegularExpressions;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace CoreAI.Downloads
{
    /// <summary>
    /// The file a partial download's bytes come from, as the server described it when the download began: the URL's
    /// sha256 (a signed URL's token is not written to disk), the file's length and its ETag / Last-Modified. Kept beside
    /// the bytes as `&lt;name&gt;.partial.json` in the runtime's own format (pyruntime/catalog/partial.py), so either side
    /// resumes what the other left, and nothing else.
    /// </summary>
    internal sealed class RemoteFile
    {
        private const long MaxLength = 1L << 62;
        private const int MaxETag = 512;
        private const int MaxLastModified = 128;
        private static readonly Regex Sha256Hex = new Regex("^[0-9a-f]{64}$");
        private static readonly HashSet<string> Keys = new HashSet<string> { "version", "url_sha256", "length", "etag", "last_modified" };

        private RemoteFile(string urlSha256, long length, string etag, string lastModified)
        {
            UrlSha256 = urlSha256;
            Length = length;
            ETag = etag;
            LastModified = lastModified;
        }

        public string UrlSha256 { get; private set; }
        public long Length { get; private set; }
        public string ETag { get; private set; }
        public string LastModified { get; private set; }

        /// <summary>The record of `url` at `length` bytes; null when the server's description is beyond reason (not resumable).</summary>
        public static RemoteFile Describe(string url, long length, string etag, string lastModified)
        {
            if (length < 1 || length > MaxLength || (etag != null && etag.Length > MaxETag)
                || (lastModified != null && lastModified.Length > MaxLastModified)) return null;
            return new RemoteFile(UrlDigest(url), length, etag, lastModified);
        }

        /// <summary>What a record keeps of a URL: its sha256 (hex).</summary>
        public static string UrlDigest(string url)
        {
            using (SHA256 sha = SHA256.Create()) return FileDownloader.Hex(sha.ComputeHash(Encoding.UTF8.GetBytes(url)));
        }

        /// <summary>The validator a range request sends as If-Range: a strong ETag, else the Last-Modified date (null: none).</summary>
        public string IfRange()
        {
            return ETag != null && !ETag.StartsWith("W/", StringComparison.Ordinal) ? ETag : LastModified;
        }

        /// <summary>
        /// True when `now` (what the server says today) is this same file: the same URL and length, and the same ETag and
        /// Last-Modified wherever this record had them.
        /// </summary>
        public bool Continues(RemoteFile now)
        {
            return now != null && now.UrlSha256 == UrlSha256 && now.Length == Length
                && (ETag == null || now.ETag == ETag) && (LastModified == null || now.LastModified == LastModified);
        }

        /// <summary>The record as the runtime writes it (compact JSON, its keys in its order).</summary>
        public byte[] ToJson()
        {
            JObject data = new JObject
            {
                ["version"] = 1,
                ["url_sha256"] = UrlSha256,
                ["length"] = Length,
                ["etag"] = ETag,
                ["last_modified"] = LastModified,
            };
            return Encoding.UTF8.GetBytes(data.ToString(Formatting.None));
        }

        /// <summary>The record in `json`; null unless it is exactly one the runtime or this package writes.</summary>
        public static RemoteFile Parse(byte[] json)
        {
            JObject data;
            try
            {
                data = JObject.Parse(new UTF8Encoding(false, true).GetString(json));
            }
            catch (Exception e) when (e is JsonException || e is ArgumentException)
            {
                return null;
            }
            foreach (KeyValuePair<string, JToken> pair in data)
                if (!Keys.Contains(pair.Key)) return null;
            JToken version = data["version"];
            JToken urlSha256 = data["url_sha256"];
            JToken length = data["length"];
            if (version != null && (version.Type != JTokenType.Integer || (long)version != 1)) return null;
            if (urlSha256 == null || urlSha256.Type != JTokenType.String || !Sha256Hex.IsMatch((string)urlSha256)) return null;
            if (length == null || length.Type != JTokenType.Integer) return null;
            string etag;
            string lastModified;
            if (!OptionalString(data["etag"], MaxETag, out etag) || !OptionalString(data["last_modified"], MaxLastModified, out lastModified))
                return null;
            long bytes;
            try
            {
                bytes = (long)length;
            }
            catch (OverflowException)
            {
                return null;
            }
            if (bytes < 1 || bytes > MaxLength) return null;
            return new RemoteFile((string)urlSha256, bytes, etag, lastModified);
        }

        private static bool OptionalString(JToken token, int maxLength, out string value)
        {
            value = null;
            if (token == null || token.Type == JTokenType.Null) return true;
            if (token.Type != JTokenType.String) return false;
            value = (string)token;
            return value.Length <= maxLength;
        }
    }
}
