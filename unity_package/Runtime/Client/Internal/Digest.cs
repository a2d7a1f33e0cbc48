using System.Security.Cryptography;
using System.Text;

namespace CoreAI.Runtime
{
    /// <summary>Small hashing and random helpers: conversation ids for load balancers, the launcher's tokens and digests.</summary>
    internal static class Digest
    {
        /// <summary>Lowercase hex SHA-256 of the UTF-8 bytes of `text`.</summary>
        public static string Sha256Hex(string text)
        {
            using (SHA256 sha = SHA256.Create())
            {
                return Hex(sha.ComputeHash(Encoding.UTF8.GetBytes(text)));
            }
        }

        /// <summary>A fresh random token: 32 bytes as hex.</summary>
        public static string NewToken()
        {
            byte[] bytes = new byte[32];
            using (RandomNumberGenerator rng = RandomNumberGenerator.Create())
            {
                rng.GetBytes(bytes);
            }
            return Hex(bytes);
        }

        private static string Hex(byte[] bytes)
        {
            StringBuilder hex = new StringBuilder(bytes.Length * 2);
            foreach (byte b in bytes) hex.Append(b.ToString("x2"));
            return hex.ToString();
        }
    }
}
