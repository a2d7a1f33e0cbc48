using System.IO;
using UnityEditor.Build;
using UnityEditor.Build.Reporting;
using UnityEditor.UnityLinker;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// Hands the package's link.xml to the Unity linker: link.xml files are read from Assets only, so a package's
    /// own must be passed through this callback (the [Preserve] attributes in the code are the first guard).
    /// </summary>
    public sealed class CoreAILinkXml : IUnityLinkerProcessor
    {
        /// <summary>The package's link.xml as Unity addresses it (Path.GetFullPath resolves Packages/ paths).</summary>
        public const string PackageLinkXml = "Packages/com.coreai.agent-memory/Runtime/Client/link.xml";

        /// <inheritdoc />
        public int callbackOrder => 0;

        /// <summary>The absolute path of the package's link.xml.</summary>
        public string GenerateAdditionalLinkXmlFile(BuildReport report, UnityLinkerBuildPipelineData data)
        {
            return Path.GetFullPath(PackageLinkXml);
        }

        /// <summary>Nothing to do (required by Unity 2021.3's interface, gone from later ones).</summary>
        public void OnBeforeRun(BuildReport report, UnityLinkerBuildPipelineData data)
        {
        }

        /// <summary>Nothing to do (required by Unity 2021.3's interface, gone from later ones).</summary>
        public void OnAfterRun(BuildReport report, UnityLinkerBuildPipelineData data)
        {
        }
    }
}
