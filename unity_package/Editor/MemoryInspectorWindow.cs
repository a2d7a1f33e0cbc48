using System;
using System.Collections.Generic;
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
    /// started it, else started for the editor with the project's CoreAIRuntimeSettings). It only reads, so it never
    /// takes a runtime away: one running with other settings than the asset's now (a play session started before an
    /// edit) is used as it is, and one that stopped or died is not restarted by the window (Connect starts one again).
    /// Everything it reads of Unity (the settings asset, persistentDataPath, the project's identity) is read on the main
    /// thread before the first await; the work after it runs on the thread pool and reports back through a main-thread
    /// queue. Repaints only draw: the strings they show are made when what they show was loaded.
    /// </summary>
    public sealed class MemoryInspectorWindow : EditorWindow
    {
        private static readonly string[] Tabs = { "Memory", "Versions", "History" };

        private readonly MainThreadQueue mainThread = new MainThreadQueue();
        private RuntimeLauncher launcher;
        private CoreAIRuntimeClient client;
        private MemoryInspectorModel model;
        private List<string> roles = new List<string>();
        private string[] roleNames = new string[0];
        private int selectedRole = -1;
        private RoleMemoryView view;
        private string memoryLength = "";
        private string[] versionLabels = new string[0];
        private string[] historyLines = new string[0];
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
            if (launcher != null && WasStopped(launcher))
            {
                // Stopped under the window (Delete All Persistent Saves): show it instead of failing on the next click.
                Disconnect();
                status = "The runtime was stopped. Connect to start it again.";
                Repaint();
            }
        }

        private void OnDisable()
        {
            // Closing the window or reloading scripts: let go of the runtime, never stop the game's.
            Disconnect();
        }

        private void Disconnect()
        {
            if (launcher != null) launcher.Detach();
            if (client != null) client.Dispose();  // ends the window's calls still in flight
            launcher = null;
            client = null;
            model = null;
            view = null;
        }

        private static bool WasStopped(RuntimeLauncher watched)
        {
            RuntimeLauncherEvent[] events = watched.RecentEvents;
            if (events.Length == 0) return false;
            RuntimeLauncherEventKind last = events[events.Length - 1].Kind;
            return last == RuntimeLauncherEventKind.Stopped || last == RuntimeLauncherEventKind.Exited;
        }

        private void OnGUI()
        {
            EditorGUILayout.BeginHorizontal();
            GUI.enabled = !busy;
            if (GUILayout.Button(model == null ? "Connect" : "Refresh", GUILayout.Width(90))) Run(model == null ? (Func<Task>)ConnectAsync : RefreshRolesAsync);
            GUI.enabled = true;
            EditorGUILayout.LabelField(status);
            EditorGUILayout.EndHorizontal();
            if (model == null) return;

            int picked = EditorGUILayout.Popup("Role", selectedRole, roleNames);
            if (picked != selectedRole && picked >= 0 && picked < roles.Count)
            {
                selectedRole = picked;
                string role = roles[picked];
                Run(() => LoadRoleAsync(role));
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
            EditorGUILayout.LabelField(memoryLength, EditorStyles.boldLabel);
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
                EditorGUILayout.LabelField(versionLabels[i]);
                GUI.enabled = !busy;
                int previous = i > 0 ? view.Versions[i - 1].Version : 0;
                int version = v.Version;
                string roleId = view.RoleId;
                if (GUILayout.Button("Diff", GUILayout.Width(50))) Run(() => DiffAsync(roleId, previous, version));
                if (GUILayout.Button("Revert", GUILayout.Width(60))
                    && EditorUtility.DisplayDialog("Revert memory", "Set the memory back to version " + v.Version + "? The revert is itself a new version.", "Revert", "Cancel"))
                    Run(() => RevertAsync(roleId, version));
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
            foreach (string line in historyLines) EditorGUILayout.SelectableLabel(line);
        }

        private void Run(Func<Task> start)
        {
            Task work;
            try
            {
                work = start();  // its synchronous part (Unity reads) runs here, on the main thread
            }
            catch (Exception e)
            {
                work = Task.FromException(e);
            }
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

        private Task ConnectAsync()
        {
            // The main thread, before any await: Unity's API throws anywhere else.
            CoreAIRuntimeSettings settings = ProjectSettingsAsset.Find();
            if (settings == null) throw new InvalidOperationException("create a CoreAIRuntimeSettings asset first (Assets/Create/CoreAI/Runtime Settings)");
            string persistentDataPath = Application.persistentDataPath;
            if (settings.UsesRemoteRuntime) return ConnectRemoteAsync(settings.ToRemoteOptions(), persistentDataPath);
            // The editor instance: the same runtime Play Mode uses (see CoreAIRuntimeBootstrap.StartRuntime).
            RuntimeLaunchOptions options = settings.ToLaunchOptions(persistentDataPath, ProjectPaths.Root(), ProjectIdentity.Current()).UseEditorInstance();
            options.ReuseAnySettings = true;  // never replace the runtime a play session uses
            options.RestartOnExit = false;    // never start again a runtime the user (or the game) stopped
            return StartAndConnectAsync(new RuntimeLauncher(options), persistentDataPath);
        }

        private async Task StartAndConnectAsync(RuntimeLauncher started, string persistentDataPath)
        {
            mainThread.Post(() => status = "Starting the runtime…");
            RuntimeEndpoint endpoint = await started.StartAsync().ConfigureAwait(false);
            CoreAIRuntimeClient connected = started.CreateClient();  // follows the token across runtime restarts
            MemoryInspectorModel opened = new MemoryInspectorModel(connected, persistentDataPath);
            List<string> listed = await opened.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() =>
            {
                launcher = started;
                client = connected;
                model = opened;
                ShowRoles(listed);
                status = (started.Reused ? "Connected to the running runtime" : "Started a runtime") + " on port " + endpoint.ConnectPort + ".";
            });
        }

        /// <summary>Remote mode: inspect the runtime Play Mode connects to (the settings' Remote Url), never start one.</summary>
        private async Task ConnectRemoteAsync(RemoteRuntimeOptions options, string persistentDataPath)
        {
            RemoteRuntime remote = new RemoteRuntime(options);
            mainThread.Post(() => status = "Connecting to the remote runtime…");
            await Task.Run(() => remote.Connect()).ConfigureAwait(false);
            CoreAIRuntimeClient connected = remote.CreateClient();
            MemoryInspectorModel opened = new MemoryInspectorModel(connected, persistentDataPath);
            List<string> listed = await opened.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() =>
            {
                client = connected;
                model = opened;
                ShowRoles(listed);
                status = "Connected to the remote runtime.";
            });
        }

        private async Task RefreshRolesAsync()
        {
            List<string> listed = await model.ListRolesAsync().ConfigureAwait(false);
            mainThread.Post(() => ShowRoles(listed));
            if (view != null) await LoadRoleAsync(view.RoleId).ConfigureAwait(false);
        }

        private async Task LoadRoleAsync(string roleId)
        {
            RoleMemoryView loaded = await model.LoadAsync(roleId).ConfigureAwait(false);
            mainThread.Post(() =>
            {
                Show(loaded);
                diff = "";
            });
        }

        private void ShowRoles(List<string> listed)
        {
            roles = listed;
            roleNames = listed.ToArray();
        }

        private void Show(RoleMemoryView loaded)
        {
            view = loaded;
            memoryLength = loaded.Memory.Length + " chars";
            versionLabels = new string[loaded.Versions.Count];
            for (int i = 0; i < versionLabels.Length; i++)
            {
                AgentMemoryVersion v = loaded.Versions[i];
                versionLabels[i] = "v" + v.Version + "  " + DateTimeOffset.FromUnixTimeSeconds(v.Timestamp).LocalDateTime + "  " + v.Action + "  " + v.Note;
            }
            historyLines = new string[loaded.ChatHistory.Length];
            for (int i = 0; i < historyLines.Length; i++) historyLines[i] = loaded.ChatHistory[i].Role + ": " + loaded.ChatHistory[i].Content;
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
    }
}
