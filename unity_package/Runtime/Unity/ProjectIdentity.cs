using System.Security.Cryptography;
using System.Text;
using UnityEngine;

namespace CoreAI.UnityIntegration
{
    /// <summary>A stable, opaque id of this project, so the launcher never reuses another project's runtime.</summary>
    public static class ProjectIdentity
    {
        /// <summary>
        /// SHA-256 (first 16 hex chars) of the product name and the project's Assets path; a Unity 6 Multiplayer Play Mode
        /// virtual player has its main project's (<see cref="ProjectPaths"/>), so it shares that project's runtime.
        /// </summary>
        public static string Current()
        {
            return Of(Application.productName, ProjectPaths.IdentityDataPath(Application.dataPath));
        }

        /// <summary>The id of a product name and data path.</summary>
        public static string Of(string productName, string dataPath)
        {
            using (SHA256 sha = SHA256.Create())
            {
                byte[] hash = sha.ComputeHash(Encoding.UTF8.GetBytes((productName ?? "") + "\n" + (dataPath ?? "")));
                StringBuilder hex = new StringBuilder();
                for (int i = 0; i < 8; i++) hex.Append(hash[i].ToString("x2"));
                return hex.ToString();
            }
        }
    }
}
