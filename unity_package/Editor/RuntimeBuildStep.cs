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
    /// Before a build, refuses a player that could have no runtime: WebGL always (no transport there), Android, iOS and
    /// consoles (no processes) unless the settings name a remote runtime — a message at build time, never an exception in
    /// a shipped player. After a Windows, macOS or Linux player build (the Linux dedicated server included), copies the
    /// frozen runtime built for that OS and the configured GGUF model into the player's StreamingAssets/CoreAI, where the
    /// player's bootstrap finds them first; a target with no runtime folder fails the build with a message naming it.
    /// </summary>
    public sealed class RuntimeBuildStep : IPreprocessBuildWithReport, IPostprocessBuildWithReport
    {
        /// <summary>Runs after Unity's own steps.</summary>
        public int callbackOrder
        {
            get { return 100; }
        }

        /// <summary>Unity's callback before a build: refuses a target that could reach no runtime (<see cref="Refuse"/>).</summary>
        public void OnPreprocessBuild(BuildReport report)
        {
            CoreAIRuntimeSettings settings = FindSettings();
            if (settings != null) Refuse(settings, report.summary.platform.ToString());
        }

        /// <summary>
        /// Throws BuildFailedException when a player for `buildTarget` (a BuildTarget name) could reach no runtime with
        /// `settings`: WebGL always; a target that cannot start processes (Android, iOS, consoles) without a Remote Url
        /// (or Remote Url From Code). Nothing for the desktop targets, which start their own.
        /// </summary>
        public static void Refuse(CoreAIRuntimeSettings settings, string buildTarget)
        {
            if (settings == null) throw new ArgumentNullException(nameof(settings));
            if (!RuntimePlatforms.CanReachARuntime(buildTarget))
                throw new BuildFailedException(RuntimePlatforms.UnsupportedMessage(buildTarget));
            if (BundledRuntime.PlatformOf(buildTarget) == null && !settings.UsesRemoteRuntime && !settings.RemoteUrlFromCode)
                throw new BuildFailedException(RuntimePlatforms.UnsupportedMessage(buildTarget) + " The build was stopped so that no "
                    + "player ships without a runtime (a game that sets RemoteUrl from code turns on Remote Url From Code).");
        }

        /// <summary>Unity's callback: bundles for the built target with the project's CoreAIRuntimeSettings.</summary>
        public void OnPostprocessBuild(BuildReport report)
        {
            CoreAIRuntimeSettings settings = FindSettings();
            if (settings == null) return; // the project does not use the CoreAI runtime
            string projectRoot = ProjectPaths.Root();
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
            if (!settings.BundleRuntimeInBuilds || platform == null) return null;  // remote mode, or nothing to start (refused before)
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
