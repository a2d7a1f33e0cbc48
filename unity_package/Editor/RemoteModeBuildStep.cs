using System;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Xml;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEditor.Build;
using UnityEditor.Build.Reporting;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// What a mobile player in remote mode needs that Unity does not add by itself: on Android the INTERNET permission
    /// (Internet Access = Require; "Auto" leaves it out when Unity sees no UnityWebRequest), on iOS 14+ the local network
    /// usage text for a runtime on the LAN (without NSLocalNetworkUsageDescription iOS blocks the connection silently).
    /// </summary>
    public sealed class RemoteModeBuildStep : IPreprocessBuildWithReport, IPostprocessBuildWithReport
    {
        /// <summary>The Info.plist key iOS requires before an app may reach the local network.</summary>
        public const string LocalNetworkKey = "NSLocalNetworkUsageDescription";

        /// <summary>The text iOS shows when it asks the player (edit it in the Xcode project if you like).</summary>
        public const string LocalNetworkText = "The game's characters talk to its AI server on your local network.";

        /// <summary>Runs after RuntimeBuildStep.</summary>
        public int callbackOrder
        {
            get { return 110; }
        }

        /// <summary>Unity's callback before a build: Android's permission.</summary>
        public void OnPreprocessBuild(BuildReport report)
        {
            CoreAIRuntimeSettings settings = ProjectSettingsAsset.Find();
            if (settings != null) Prepare(settings, report.summary.platform.ToString());
        }

        /// <summary>Unity's callback after a build: iOS's Info.plist.</summary>
        public void OnPostprocessBuild(BuildReport report)
        {
            CoreAIRuntimeSettings settings = ProjectSettingsAsset.Find();
            if (settings != null) Finish(settings, report.summary.platform.ToString(), report.summary.outputPath);
        }

        /// <summary>Before an Android build in remote mode: Internet Access = Require. True when it changed the setting.</summary>
        public static bool Prepare(CoreAIRuntimeSettings settings, string buildTarget)
        {
            if (settings == null || !settings.UsesRemoteRuntime || buildTarget != "Android") return false;
            if (PlayerSettings.Android.forceInternetPermission) return false;
            PlayerSettings.Android.forceInternetPermission = true;
            CoreAILog.Info("remote mode: set Player Settings > Android > Internet Access to Require (the runtime is reached over the network)");
            return true;
        }

        /// <summary>
        /// After an iOS build in remote mode with a runtime on the local network: adds NSLocalNetworkUsageDescription to the
        /// Xcode project's Info.plist when it is missing. True when it added it.
        /// </summary>
        public static bool Finish(CoreAIRuntimeSettings settings, string buildTarget, string outputPath)
        {
            if (settings == null || !settings.UsesRemoteRuntime || buildTarget != "iOS") return false;
            Uri url;
            if (!Uri.TryCreate(settings.RemoteUrl.Trim(), UriKind.Absolute, out url) || !IsLocalNetwork(url.Host)) return false;
            string plist = Path.Combine(outputPath ?? "", "Info.plist");
            if (!File.Exists(plist))
            {
                CoreAILog.Warning("remote mode on the local network: add " + LocalNetworkKey + " to the Xcode project's Info.plist (none was found)");
                return false;
            }
            return AddLocalNetworkUsage(plist);
        }

        /// <summary>True for an address or name on the local network: private and link-local IPv4/IPv6, `.local` names.</summary>
        public static bool IsLocalNetwork(string host)
        {
            if (string.IsNullOrEmpty(host)) return false;
            if (host.EndsWith(".local", StringComparison.OrdinalIgnoreCase)) return true;
            IPAddress address;
            if (!IPAddress.TryParse(host.Trim('[', ']'), out address) || IPAddress.IsLoopback(address)) return false;
            byte[] b = address.GetAddressBytes();
            if (address.AddressFamily == AddressFamily.InterNetwork)
                return b[0] == 10 || (b[0] == 172 && b[1] >= 16 && b[1] <= 31) || (b[0] == 192 && b[1] == 168) || (b[0] == 169 && b[1] == 254);
            return address.IsIPv6LinkLocal || (b[0] & 0xFE) == 0xFC;
        }

        private static bool AddLocalNetworkUsage(string plist)
        {
            XmlDocument document = new XmlDocument { XmlResolver = null, PreserveWhitespace = true };
            using (XmlReader reader = XmlReader.Create(plist, new XmlReaderSettings { DtdProcessing = DtdProcessing.Ignore, XmlResolver = null }))
            {
                document.Load(reader);
            }
            XmlNode dict = document.SelectSingleNode("/plist/dict");
            if (dict == null) throw new BuildFailedException("CoreAI: the Xcode project's Info.plist has no top-level dict");
            foreach (XmlNode key in dict.SelectNodes("key"))
            {
                if (key.InnerText == LocalNetworkKey) return false;  // the game's own text wins
            }
            XmlElement name = document.CreateElement("key");
            name.InnerText = LocalNetworkKey;
            XmlElement value = document.CreateElement("string");
            value.InnerText = LocalNetworkText;
            dict.AppendChild(name);
            dict.AppendChild(value);
            document.Save(plist);
            CoreAILog.Info("remote mode on the local network: added " + LocalNetworkKey + " to Info.plist");
            return true;
        }
    }
}
