using System.IO;
using CoreAI.Downloads;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// CoreAI → Models and Runtime: pick a model from the catalogue, pull it with progress and assign it to the project's
    /// CoreAIRuntimeSettings; fetch the released runtime for this editor's OS (or for a build's OS) instead of building it.
    /// </summary>
    public sealed class ModelsWindow : EditorWindow
    {
        private static readonly string[] Oses = { "windows", "macos", "linux" };
        private ModelsPanel panel;
        private int selected;
        private int buildOs = -1;
        private string releaseUrl = "";
        private Vector2 scroll;

        /// <summary>Opens the window.</summary>
        [MenuItem("CoreAI/Models and Runtime", false, 90)]
        public static void Open()
        {
            GetWindow<ModelsWindow>("CoreAI Models").Show();
        }

        /// <summary>Opens the window and fetches the runtime for this editor's OS and CPU.</summary>
        [MenuItem("CoreAI/Fetch Runtime for This Editor", false, 91)]
        public static void FetchForThisEditor()
        {
            ModelsWindow window = GetWindow<ModelsWindow>("CoreAI Models");
            window.Show();
            ModelsPanel current = window.Panel();
            if (current != null && !current.Busy) current.FetchRuntime(ModelsPanel.EditorOs(), RuntimeArchive.HostArch() ?? "x64", window.releaseUrl);
        }

        private ModelsPanel Panel()
        {
            if (panel != null) return panel;
            CoreAIRuntimeSettings settings = RuntimeBuildStep.FindSettings();
            if (settings == null) return null;
            string root = Directory.GetParent(Application.dataPath) == null ? "" : Directory.GetParent(Application.dataPath).FullName;
            panel = new ModelsPanel(settings, root);
            return panel;
        }

        private void Update()
        {
            if (panel != null && panel.Pump() > 0) Repaint();
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
            string[] names = new string[ModelCatalog.Entries.Count];
            for (int i = 0; i < names.Length; i++)
            {
                CatalogModel entry = ModelCatalog.Entries[i];
                names[i] = entry.Name + (current.Store.IsPulled(entry.Name) ? "  (pulled)" : "");
            }
            selected = EditorGUILayout.Popup("Model", selected, names);
            CatalogModel model = ModelCatalog.Entries[selected];
            GUILayout.Label(model.Description);
            GUILayout.Label("Licence: " + model.License + "   Context: " + model.ContextLength + " tokens   Tools: " + model.ToolMode
                + "   Size: " + (model.SizeBytes > 0 ? (model.SizeBytes / 1e6).ToString("0") + " MB" : "shown when the download starts"));
            GUILayout.Label("Checksum: " + model.ChecksumSource);
            GUI.enabled = !current.Busy;
            if (GUILayout.Button("Pull and assign to the settings")) current.Pull(model);

            EditorGUILayout.LabelField("Runtime", EditorStyles.boldLabel);
            releaseUrl = GUILayout.TextField(releaseUrl);
            GUILayout.Label("Release URL (empty: the release of the tag this package was installed from: " + (current.InstalledReleaseUrl() ?? "unknown") + ")");
            if (GUILayout.Button("Fetch the runtime for this editor")) current.FetchRuntime(ModelsPanel.EditorOs(), RuntimeArchive.HostArch() ?? "x64", releaseUrl);
            buildOs = EditorGUILayout.Popup("For a player build on", buildOs, Oses);
            if (buildOs >= 0 && GUILayout.Button("Fetch the " + Oses[buildOs] + " runtime"))
                current.FetchRuntime(Oses[buildOs], Oses[buildOs] == "macos" ? "arm64" : "x64", releaseUrl);
            GUI.enabled = true;

            if (current.Busy)
            {
                DownloadProgress p = current.Progress;
                GUILayout.Label(p == null ? current.Status : p.Item + ": " + (p.Fraction >= 0 ? (p.Fraction * 100).ToString("0.0") + "% of "
                    + (p.Total / 1e6).ToString("0.0") + " MB" : (p.Received / 1e6).ToString("0.0") + " MB"));
                if (GUILayout.Button("Cancel (resumes next time)")) current.Cancel();
            }
            else if (current.Status.Length > 0)
            {
                EditorGUILayout.HelpBox(current.Status, MessageType.Info);
            }
            EditorGUILayout.EndScrollView();
        }
    }
}
