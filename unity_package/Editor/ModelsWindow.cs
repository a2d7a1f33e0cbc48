using System;
using CoreAI.Downloads;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// CoreAI → Models and Runtime: pick a model from the catalogue, pull it with progress and assign it to the project's
    /// CoreAIRuntimeSettings; fetch the released runtime for this machine (its real CPU: an x64 editor under Rosetta gets
    /// the arm64 runtime) or for a player build's OS. Downloads belong to the editor (<see cref="EditorDownloads"/>):
    /// closing this window or pressing Play does not stop them. Repaints only draw: every string is made when what it
    /// shows changes, and the disk is read on focus and when a download ends (<see cref="ModelsPanel.Refresh"/>).
    /// </summary>
    public sealed class ModelsWindow : EditorWindow
    {
        private static readonly string[] Targets = { "windows-x64", "macos-arm64", "macos-x64", "linux-x64" };
        private static readonly string[] FetchLabels = Array.ConvertAll(Targets, t => "Fetch the " + t + " runtime");
        private ModelsPanel panel;
        private int selected;
        private int shownModel = -1;
        private string modelDetails = "";
        private string modelChecksum = "";
        private int buildTarget = -1;
        private string releaseUrl = "";
        private string releaseHint = "";
        private string progressLine = "";
        private string refusal;  // why the last Fetch did not start, until the next one
        private DownloadProgress shownProgress;
        private bool wasBusy;
        private Vector2 scroll;

        /// <summary>Opens the window.</summary>
        [MenuItem("CoreAI/Models and Runtime", false, 90)]
        public static void Open()
        {
            GetWindow<ModelsWindow>("CoreAI Models").Show();
        }

        /// <summary>Opens the window and fetches the runtime for this machine's OS and CPU.</summary>
        [MenuItem("CoreAI/Fetch Runtime for This Editor", false, 91)]
        public static void FetchForThisEditor()
        {
            ModelsWindow window = GetWindow<ModelsWindow>("CoreAI Models");
            window.Show();
            window.FetchForEditor();
        }

        private ModelsPanel Panel()
        {
            if (panel != null) return panel;
            CoreAIRuntimeSettings settings = ProjectSettingsAsset.Find();
            if (settings == null) return null;
            string root = ProjectPaths.Root();
            panel = new ModelsPanel(settings, root);
            OnChanged();
            return panel;
        }

        private void FetchForEditor()
        {
            string os = ModelsPanel.EditorOs();
            Fetch(os, RuntimeArchive.HostArch(os));
        }

        private void Fetch(string os, string arch)
        {
            ModelsPanel current = Panel();
            if (current == null || current.Busy) return;
            refusal = current.FetchRefusal(arch, releaseUrl);
            if (refusal == null) current.FetchRuntime(os, arch, releaseUrl);
        }

        private void OnFocus()
        {
            if (panel == null) return;
            panel.Refresh();
            OnChanged();
        }

        private void Update()
        {
            ModelsPanel current = panel;
            if (current == null) return;
            bool busy = current.Busy;
            bool repaint = busy != wasBusy;
            if (wasBusy && !busy)
            {
                current.Refresh();  // a pull ended: which models are pulled changed
                OnChanged();
            }
            wasBusy = busy;
            if (current.Progress != shownProgress)
            {
                shownProgress = current.Progress;
                progressLine = ProgressLine(shownProgress, current.Status);
                repaint = true;
            }
            if (repaint) Repaint();
        }

        private void OnChanged()
        {
            shownModel = -1;
            releaseHint = "Release URL (empty: the release of the tag this package was installed from: " + (panel.ReleaseUrl ?? "unknown") + ")";
        }

        private void OnGUI()
        {
            ModelsPanel current = Panel();
            if (current == null)
            {
                EditorGUILayout.HelpBox("Create a CoreAIRuntimeSettings asset first (Assets > Create > CoreAI > Runtime Settings).", MessageType.Info);
                return;
            }
            scroll = EditorGUILayout.BeginScrollView(scroll);
            EditorGUILayout.LabelField("Models", EditorStyles.boldLabel);
            selected = EditorGUILayout.Popup("Model", selected, current.ModelLabels);
            if (selected != shownModel) Describe(selected);
            CatalogModel model = ModelCatalog.Entries[selected];
            GUILayout.Label(model.Description);
            GUILayout.Label(modelDetails);
            GUILayout.Label(modelChecksum);
            GUI.enabled = !current.Busy;
            if (GUILayout.Button("Pull and assign to the settings")) current.Pull(model);

            EditorGUILayout.LabelField("Runtime", EditorStyles.boldLabel);
            releaseUrl = GUILayout.TextField(releaseUrl);
            GUILayout.Label(releaseHint);
            if (GUILayout.Button("Fetch the runtime for this editor")) FetchForEditor();
            buildTarget = EditorGUILayout.Popup("For a player build on", buildTarget, Targets);
            if (buildTarget >= 0 && GUILayout.Button(FetchLabels[buildTarget]))
            {
                string[] target = Targets[buildTarget].Split('-');
                Fetch(target[0], target[1]);
            }
            GUI.enabled = true;
            if (refusal != null) EditorGUILayout.HelpBox(refusal, MessageType.Warning);

            if (current.Busy)
            {
                GUILayout.Label(progressLine);
                if (GUILayout.Button("Cancel")) current.Cancel();
            }
            else if (current.Status.Length > 0)
            {
                EditorGUILayout.HelpBox(current.Status, MessageType.Info);
            }
            EditorGUILayout.EndScrollView();
        }

        private void Describe(int index)
        {
            CatalogModel model = ModelCatalog.Entries[index];
            shownModel = index;
            modelDetails = "Licence: " + model.License + "   Context: " + model.ContextLength + " tokens   Tools: " + model.ToolMode
                + "   Size: " + (model.SizeBytes > 0 ? (model.SizeBytes / 1e6).ToString("0") + " MB" : "shown when the download starts");
            modelChecksum = "Checksum: " + model.ChecksumSource;
        }

        private static string ProgressLine(DownloadProgress p, string status)
        {
            if (p == null) return status;
            return p.Item + ": " + (p.Fraction >= 0 ? (p.Fraction * 100).ToString("0.0") + "% of " + (p.Total / 1e6).ToString("0.0") + " MB"
                : (p.Received / 1e6).ToString("0.0") + " MB");
        }
    }
}
