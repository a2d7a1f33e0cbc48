using System;
using System.Collections.Generic;
using System.IO;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Launcher;
using CoreAI.Runtime;
using CoreAI.UnityIntegration;
using UnityEditor;
using UnityEngine;

namespace CoreAI.EditorTools
{
    /// <summary>
    /// CoreAI → Memory Inspector: lists roles and shows a role's memory document, its versions (diff,
    /// revert) and its chat history, through the runtime (reused when the game or an earlier window
    /// started it, else started for the editor with the project's CoreAIRuntimeSettings).
    /// </summary>
    public sealed class MemoryInspectorWindow : EditorWindow
    {
        private static readonly string[] Tabs = { "Memory", "Versions", "History" };

        private readonly MainThreadQueue mainThread = new MainThreadQueue();
        private RuntimeLauncher launcher;
        private CoreAIRuntimeClient client;
        private MemoryInspectorModel model;
        private List<string> roles = new List<string>();
        private int selectedRole = -1;
        private RoleMemoryView view;
        private int tab;
        private string diff = "";
        private string status = "Not connected.";
        private bool busy;
        private Vector2 scroll;

        /// <summary>Opens the window.</summary>
        [MenuItem("CoreAI/Memory Inspector", false, 100)]
        public static void Open()
        {
            GetWindow<MemoryInspectorWindow>("CoreAI Memory").Show();
        }

        private void OnInspectorUpdate()
        {
            if (mainThread.Drain(16, e => status = "Error: " + e.GetType().Name) > 0) Repaint();
        }

        private void OnDisable()
        {
            // Closing the window or reloading scripts: let go of the runtime, never stop the game's.
            if (launcher != null) launcher.Detach();
            if (client != null) client.Dispose();
            launcher = null;
            client = null;
            model = null;
        }

        private void OnGUI()
        {
            EditorGUILayout.BeginHorizontal();
            GUI.enabled = !busy;
            if (GUILayout.Button(model == null ? "Connect" : "Refresh", GUILayout.Width(90))) Run(model == null ? ConnectAsync() : RefreshRolesAsync());
            GUI.enabled = true;
            EditorGUILayout.LabelField(status);
            EditorGUILayout.EndHorizontal();
            if (model == null) return;

            int picked = EditorGUILayout.Popup("Role", selectedRole, roles.ToArray());
            if (picked != selectedRole && picked >= 0 && picked < roles.Count)
            {
                selectedRole = picked;
                Run(LoadRoleAsync(roles[picked]));
            }
            if (view == null) return;
            tab = GUILayout.Toolbar(tab, Tabs);
            scroll = EditorGUILayout.BeginScrollView(scroll);
            if (tab == 0) DrawMemory();
            else if (tab == 1) DrawVersions();
            else DrawHistory();
            EditorGUILayout.EndScrollView();
        }

        private void DrawMemory()
        {
            if (!view.HasMemory)
            {
                EditorGUILayout.HelpBox("This role has no memory document.", MessageType.Info);
                return;
            }
            EditorGUILayout.LabelField(view.Memory.Length + " chars", EditorStyles.boldLabel);
            EditorGUILayout.SelectableLabel(view.Memory, GUILayout.ExpandHeight(true));
        }

        private void DrawVersions()
        {
            if (view.Versions.Count == 0)
            {
                EditorGUILayout.HelpBox("No versions retained.", MessageType.Info);
                return;
            }
            for (int i = view.Versions.Count - 1; i >= 0; i--)
            {
                AgentMemoryVersion v = view.Versions[i];
                EditorGUILayout.BeginHorizontal();
                EditorGUILayout.LabelField("v" + v.Version + "  " + DateTimeOffset.FromUnixTimeSeconds(v.Timestamp).LocalDateTime + "  " + v.Action + "  " + v.Note);
                GUI.enabled = !busy;
                int previous = i > 0 ? view.Versions[i - 1].Version : 0;
                if (GUILayout.Button("Diff", GUILayout.Width(50))) Run(DiffAsync(view.RoleId, previous, v.Version));
                if (GUILayout.Button("Revert", GUILayout.Width(60))
                    && EditorUtility.DisplayDialog("Revert memory", "Set the memory back to version " + v.Version + "? The revert is itself a new version.", "Revert", "Cancel"))
                    Run(RevertAsync(view.RoleId, v.Version));
                GUI.enabled = true;
                EditorGUILayout.EndHorizontal();
            }
            if (diff.Length > 0) EditorGUILayout.TextArea(diff, GUILayout.MinHeight(120));
        }

        private void DrawHistory()
        {
            if (view.ChatHistory.Length == 0)
            {
                EditorGUILayout.HelpBox("No chat history.", MessageType.Info);
                return;
            }
            foreach (ChatMessage m in view.ChatHistory) EditorGUILayout.SelectableLabel(m.Role + ": " + m.Content);
        }

        private void Run(Task work)
        {
            busy = true;
            work.ContinueWith(t => mainThread.Post(() =>
            {
                busy = false;
                if (t.IsFaulted) status = "Error: " + Describe(t.Exception.GetBaseException());
            }));
        }

        private static string Describe(Exception e)
        {
            // Launch errors name the runtime path and quote its log; the others carry the runtime's message.
            return e is RuntimeLaunchException || e is CoreAIRuntimeException ? e.Message : e.GetType().Name + ": " + e.Message;
        }

        private async Task ConnectAsync()
        {
            CoreAIRuntimeSettings settings = FindSettings();
            if (settings == null) throw new InvalidOperationException("create a CoreAIRuntimeSettings asset first (Assets/Create/CoreAI/Runtime Settings)");
            if (settings.UsesRemoteRuntime)
            {
                await ConnectRemoteAsync(settings).ConfigureAwait(false);
                return;
            }
            string projectRoot = Directory.GetParent(Application.dataPath) == null ? "" : Directory.GetParent(Application.dataPath).FullName;
            // The editor instance: the same runtime Play Mode uses (see CoreAIRuntimeBootstrap.StartRuntime).
            RuntimeLauncher started = new RuntimeLauncher(
                settings.ToLaunchOptions(Application.persistentDataPath, projectRoot, ProjectIdentity.Current()).UseEditorInstance());
            mainThread.Post(() => status = "Starting the runtime…");
            RuntimeEndpoint endpoint = await started.StartAsync().ConfigureAwait(false);
            CoreAIRuntimeClient connected = started.CreateClient();  // follows the token across runtime restarts
            MemoryInspectorModel opened = new MemoryInspectorModel(connected, Application.persistentDataPath);
            List<string> listed = await opened.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() =>
            {
                launcher = started;
                client = connected;
                model = opened;
                roles = listed;
                status = (started.Reused ? "Connected to the running runtime" : "Started a runtime") + " on port " + endpoint.ConnectPort + ".";
            });
        }

        /// <summary>Remote mode: inspect the runtime Play Mode connects to (the settings' Remote Url), never start one.</summary>
        private async Task ConnectRemoteAsync(CoreAIRuntimeSettings settings)
        {
            RemoteRuntime remote = new RemoteRuntime(settings.ToRemoteOptions());
            mainThread.Post(() => status = "Connecting to the remote runtime…");
            await Task.Run(() => remote.Connect()).ConfigureAwait(false);
            CoreAIRuntimeClient connected = remote.CreateClient();
            MemoryInspectorModel opened = new MemoryInspectorModel(connected, Application.persistentDataPath);
            List<string> listed = await opened.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() =>
            {
                client = connected;
                model = opened;
                roles = listed;
                status = "Connected to the remote runtime.";
            });
        }

        private async Task RefreshRolesAsync()
        {
            List<string> listed = await model.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() => roles = listed);
            if (view != null) await LoadRoleAsync(view.RoleId).ConfigureAwait(false);
        }

        private async Task LoadRoleAsync(string roleId)
        {
            RoleMemoryView loaded = await model.LoadAsync(roleId).ConfigureAwait(false);
            mainThread.Post(() =>
            {
                view = loaded;
                diff = "";
            });
        }

        private async Task DiffAsync(string roleId, int from, int to)
        {
            string text = await model.DiffAsync(roleId, from, to).ConfigureAwait(false);
            mainThread.Post(() => diff = text.Length == 0 ? "(no changes)" : text);
        }

        private async Task RevertAsync(string roleId, int version)
        {
            MemoryToolResult result = await model.RevertAsync(roleId, version).ConfigureAwait(false);
            mainThread.Post(() => status = result.Success ? result.Message : "Revert failed: " + result.Error);
            await LoadRoleAsync(roleId).ConfigureAwait(false);
        }

        private static CoreAIRuntimeSettings FindSettings()
        {
            foreach (string guid in AssetDatabase.FindAssets("t:CoreAIRuntimeSettings"))
            {
                CoreAIRuntimeSettings found = AssetDatabase.LoadAssetAtPath<CoreAIRuntimeSettings>(AssetDatabase.GUIDToAssetPath(guid));
                if (found != null) return found;
            }
            return null;
        }
    }
}
