// Stub of UnityEditor's build pipeline API (only what the package uses; signatures match Unity's).
using System;

namespace UnityEditor
{
    /// <summary>Target platform of a build (the members the package maps; Unity has more).</summary>
    public enum BuildTarget
    {
        /// <summary>macOS player.</summary>
        StandaloneOSX = 2,

        /// <summary>32-bit Windows player.</summary>
        StandaloneWindows = 5,

        /// <summary>iOS player.</summary>
        iOS = 9,

        /// <summary>Android player.</summary>
        Android = 13,

        /// <summary>64-bit Windows player.</summary>
        StandaloneWindows64 = 19,

        /// <summary>WebGL player.</summary>
        WebGL = 20,

        /// <summary>64-bit Linux player (and the Linux dedicated server).</summary>
        StandaloneLinux64 = 24,
    }
}

namespace UnityEditor.Build
{
    /// <summary>Orders build callbacks.</summary>
    public interface IOrderedCallback
    {
        /// <summary>Lower runs first.</summary>
        int callbackOrder { get; }
    }

    /// <summary>Called before a player build.</summary>
    public interface IPreprocessBuildWithReport : IOrderedCallback
    {
        /// <summary>The build is about to start.</summary>
        void OnPreprocessBuild(UnityEditor.Build.Reporting.BuildReport report);
    }

    /// <summary>Called after a player build.</summary>
    public interface IPostprocessBuildWithReport : IOrderedCallback
    {
        /// <summary>The build finished writing the player.</summary>
        void OnPostprocessBuild(UnityEditor.Build.Reporting.BuildReport report);
    }

    /// <summary>Callbacks around the Unity linker (Unity 2021.3's members; later versions keep only the first).</summary>
    public interface IUnityLinkerProcessor : IOrderedCallback
    {
        /// <summary>The path of an extra link.xml for this build, or null.</summary>
        string GenerateAdditionalLinkXmlFile(UnityEditor.Build.Reporting.BuildReport report, UnityEditor.UnityLinker.UnityLinkerBuildPipelineData data);

        /// <summary>Before the linker runs.</summary>
        void OnBeforeRun(UnityEditor.Build.Reporting.BuildReport report, UnityEditor.UnityLinker.UnityLinkerBuildPipelineData data);

        /// <summary>After the linker ran.</summary>
        void OnAfterRun(UnityEditor.Build.Reporting.BuildReport report, UnityEditor.UnityLinker.UnityLinkerBuildPipelineData data);
    }

    /// <summary>Thrown by a build callback to fail the build with a message.</summary>
    public class BuildFailedException : Exception
    {
        /// <summary>A build failure with `message`.</summary>
        public BuildFailedException(string message) : base(message)
        {
        }

        /// <summary>A build failure caused by `innerException`.</summary>
        public BuildFailedException(Exception innerException) : base(innerException == null ? "" : innerException.Message, innerException)
        {
        }
    }
}

namespace UnityEditor.Build.Reporting
{
    /// <summary>The outcome of a build.</summary>
    public sealed class BuildReport : UnityEngine.Object
    {
        /// <summary>Stub only: a report for `summary` (Unity makes reports itself).</summary>
        public BuildReport(BuildSummary summary)
        {
            this.summary = summary;
        }

        /// <summary>What was built, where.</summary>
        public BuildSummary summary { get; private set; }
    }

    /// <summary>What a build made.</summary>
    public struct BuildSummary
    {
        /// <summary>The target platform.</summary>
        public UnityEditor.BuildTarget platform { get; set; }

        /// <summary>The player's path: the .exe, the Linux executable, or the .app.</summary>
        public string outputPath { get; set; }
    }
}

namespace UnityEditor.UnityLinker
{
    /// <summary>What the linker works on.</summary>
    public sealed class UnityLinkerBuildPipelineData
    {
        /// <summary>The target platform.</summary>
        public UnityEditor.BuildTarget target;

        /// <summary>Where the assemblies to link are.</summary>
        public string inputDirectory;
    }
}
