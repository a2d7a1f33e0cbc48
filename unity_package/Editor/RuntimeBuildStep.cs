using System;
using System.IO;
using CoreAI.Launcher;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEditor.Build;
using UnityEditor.Build.Reporting;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// After a Windows, macOS or Linux player build (the Linux dedicated server included), copies the frozen
    /// runtime built for that OS and the configured GGUF model into the player's StreamingAssets/CoreAI, where
    /// the player's bootstrap finds them first. A target with no runtime folder fails the build with a message
    /// naming the folder. Targets that cannot start processes (Android, iOS, WebGL, consoles) are left alone.
    /// </summary>
    public sealed class RuntimeBuildStep : IPostprocessBuildWithReport
    {
        /// <summary>Runs after Unity's own steps.</summary>
        public int callbackOrder
        {
            get { return 100; }
        }

        /// <summary>Unity's callback: bundles for the built target with the project's CoreAIRuntimeSettings.</summary>
        public void OnPostprocessBuild(BuildReport report)
        {
            CoreAIRuntimeSettings settings = FindSettings();
            if (settings == null) return; // the project does not use the CoreAI runtime
            string projectRoot = Directory.GetParent(Application.dataPath) == null ? "" : Directory.GetParent(Application.dataPath).FullName;
            BundleResult result = Bundle(settings, report.summary.platform.ToString(), report.summary.outputPath, projectRoot);
            if (result == null) return;
            CoreAILog.Info("bundled the " + result.Platform + " runtime into the player build (" + result.FileCount + " files)");
            if (result.Platform == "macos")
                CoreAILog.Warning("the runtime was added to the .app after Unity signed it: sign the whole .app again (and notarize it) "
                    + "before shipping, or Gatekeeper refuses it; see the CoreAI Unity guide, Shipping");
        }

        /// <summary>
        /// Copies the runtime for `buildTarget` (and the model) into the player at `outputPath`; null when nothing is
        /// bundled (bundling off, or a target without processes). Throws BuildFailedException naming what is missing.
        /// </summary>
        public static BundleResult Bundle(CoreAIRuntimeSettings settings, string buildTarget, string outputPath, string projectRoot)
        {
            if (settings == null) throw new ArgumentNullException(nameof(settings));
            string platform = BundledRuntime.PlatformOf(buildTarget);
            // Said at build time too: this player will only have a runtime through remote mode.
            if (platform == null && !settings.UsesRemoteRuntime) CoreAILog.Warning(RuntimePlatforms.UnsupportedMessage(buildTarget));
            if (!settings.BundleRuntimeInBuilds || platform == null) return null;
            try
            {
                return BundledRuntime.CopyInto(buildTarget, platform, settings.RuntimeFolderFor(platform, projectRoot),
                    settings.ModelFileFor(projectRoot), BundledRuntime.StreamingAssetsOf(platform, outputPath), settings.ServeConfig());
            }
            catch (BundledRuntimeException e)
            {
                throw new BuildFailedException(e.Message);
            }
            catch (IOException e)
            {
                throw new BuildFailedException("CoreAI: copying the runtime into the player build failed: " + e.Message);
            }
        }

        /// <summary>The project's CoreAIRuntimeSettings asset (<see cref="ProjectSettingsAsset.Find()"/>: the first by path), or null.</summary>
        public static CoreAIRuntimeSettings FindSettings()
        {
            return ProjectSettingsAsset.Find();
        }
    }
}
