// Stub of the UnityEditor scripting API (only what the package uses; signatures match Unity's).
using System;
using System.Collections.Generic;
using UnityEngine;

namespace UnityEditor
{
    /// <summary>Adds a menu item to the main menu.</summary>
    [AttributeUsage(AttributeTargets.Method, AllowMultiple = true)]
    public sealed class MenuItem : Attribute
    {
        /// <summary>The menu path.</summary>
        public string menuItem;

        /// <summary>True for the validate function of a menu item.</summary>
        public bool validate;

        /// <summary>The order of the item.</summary>
        public int priority;

        /// <summary>A menu item at `itemName`.</summary>
        public MenuItem(string itemName) : this(itemName, false)
        {
        }

        /// <summary>A menu item, or its validate function.</summary>
        public MenuItem(string itemName, bool isValidateFunction) : this(itemName, isValidateFunction, 1000)
        {
        }

        /// <summary>A menu item with a priority.</summary>
        public MenuItem(string itemName, bool isValidateFunction, int priority)
        {
            menuItem = itemName;
            validate = isValidateFunction;
            this.priority = priority;
        }
    }

    /// <summary>Editor application state (stub: isPlaying is settable; StubPlayMode drives the transitions).</summary>
    public sealed class EditorApplication
    {
        /// <summary>Whether the Editor is in Play Mode.</summary>
        public static bool isPlaying
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_isPlaying");
                return StubEditorState.IsPlaying;
            }
            set
            {
                StubEngine.ThrowIfNotMainThread("set_isPlaying");
                StubEditorState.IsPlaying = value;
            }
        }

        /// <summary>Raised on every Play Mode transition (on the main thread).</summary>
        public static event Action<PlayModeStateChange> playModeStateChanged;

        /// <summary>A callback of the editor's loop.</summary>
        public delegate void CallbackFunction();

        /// <summary>Called on every editor tick (about 100 times a second, also without a window open; stub: StubEditorLoop.Tick).</summary>
        public static CallbackFunction update;

        /// <summary>Raised when the editor is about to quit.</summary>
        public static event Action quitting;

        internal static void RaisePlayModeStateChanged(PlayModeStateChange change)
        {
            Action<PlayModeStateChange> handler = playModeStateChanged;
            if (handler != null) handler(change);
        }

        internal static void RaiseUpdate()
        {
            CallbackFunction handler = update;
            if (handler != null) handler();
        }

        internal static void RaiseQuitting()
        {
            Action handler = quitting;
            if (handler != null) handler();
        }
    }

    /// <summary>Stub only: the editor's loop ticking, and quitting. Not part of Unity's API.</summary>
    public static class StubEditorLoop
    {
        /// <summary>One editor tick: EditorApplication.update (on the main thread).</summary>
        public static void Tick()
        {
            StubEngine.ThrowIfNotMainThread("Tick");
            EditorApplication.RaiseUpdate();
        }

        /// <summary>The editor quitting: EditorApplication.quitting.</summary>
        public static void Quit()
        {
            StubEngine.ThrowIfNotMainThread("Quit");
            EditorApplication.RaiseQuitting();
        }
    }

    /// <summary>Values kept for the editor session: they survive domain reloads (entering Play, a script edit), not a restart.</summary>
    public static class SessionState
    {
        /// <summary>The string stored under `key`, or `defaultValue`.</summary>
        public static string GetString(string key, string defaultValue)
        {
            StubEngine.ThrowIfNotMainThread("SessionState.GetString");
            string value;
            lock (StubEditorState.Session) return StubEditorState.Session.TryGetValue(key, out value) ? value : defaultValue;
        }

        /// <summary>Stores `value` under `key`.</summary>
        public static void SetString(string key, string value)
        {
            StubEngine.ThrowIfNotMainThread("SessionState.SetString");
            lock (StubEditorState.Session) StubEditorState.Session[key] = value;
        }

        /// <summary>Removes `key`.</summary>
        public static void EraseString(string key)
        {
            StubEngine.ThrowIfNotMainThread("SessionState.EraseString");
            lock (StubEditorState.Session) StubEditorState.Session.Remove(key);
        }
    }

    /// <summary>The Play Mode transitions EditorApplication.playModeStateChanged reports.</summary>
    public enum PlayModeStateChange
    {
        /// <summary>Edit Mode began (after Play Mode ended).</summary>
        EnteredEditMode,
        /// <summary>Edit Mode is ending (Play was pressed).</summary>
        ExitingEditMode,
        /// <summary>Play Mode began.</summary>
        EnteredPlayMode,
        /// <summary>Play Mode is ending (Stop was pressed).</summary>
        ExitingPlayMode,
    }

    /// <summary>Runs a class's static constructor when the editor loads scripts (and after every domain reload).</summary>
    [AttributeUsage(AttributeTargets.Class)]
    public class InitializeOnLoadAttribute : Attribute
    {
    }

    /// <summary>Runs a static method when the editor loads scripts (and after every domain reload).</summary>
    [AttributeUsage(AttributeTargets.Method)]
    public class InitializeOnLoadMethodAttribute : Attribute
    {
    }

    /// <summary>Events around a domain reload (script compilation, entering Play Mode).</summary>
    public static class AssemblyReloadEvents
    {
        /// <summary>A reload callback.</summary>
        public delegate void AssemblyReloadCallback();

        /// <summary>Raised before the scripts are unloaded.</summary>
        public static event AssemblyReloadCallback beforeAssemblyReload;

        /// <summary>Raised after the scripts were loaded again.</summary>
        public static event AssemblyReloadCallback afterAssemblyReload;

        internal static void RaiseBefore()
        {
            AssemblyReloadCallback handler = beforeAssemblyReload;
            if (handler != null) handler();
        }

        internal static void RaiseAfter()
        {
            AssemblyReloadCallback handler = afterAssemblyReload;
            if (handler != null) handler();
        }
    }

    /// <summary>Stub only: the editor's engine state (kept by a fake domain reload). Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubEditorState
    {
        /// <summary>Value of EditorApplication.isPlaying.</summary>
        public static bool IsPlaying;

        /// <summary>Open editor windows, oldest first.</summary>
        public static readonly List<EditorWindow> Windows = new List<EditorWindow>();

        /// <summary>Value of PlayerSettings.Android.forceInternetPermission.</summary>
        public static bool AndroidForceInternetPermission;

        /// <summary>SessionState's values (engine-side: a domain reload keeps them; StubEditorState.Session.Clear() is a restart).</summary>
        public static readonly Dictionary<string, string> Session = new Dictionary<string, string>();
    }

    /// <summary>Editor utility functions (stub: dialogs answer StubDialogs.Answer).</summary>
    public sealed class EditorUtility
    {
        /// <summary>Marks `target` changed, so the Editor saves it (stub: counted in StubDialogs.DirtyCount).</summary>
        public static void SetDirty(UnityEngine.Object target)
        {
            StubEngine.ThrowIfNotMainThread("SetDirty");
            StubDialogs.DirtyCount++;
        }

        /// <summary>Shows a modal dialog; true when `ok` is pressed.</summary>
        public static bool DisplayDialog(string title, string message, string ok, string cancel = "")
        {
            StubEngine.ThrowIfNotMainThread("DisplayDialog");
            StubDialogs.LastTitle = title;
            StubDialogs.LastMessage = message;
            return StubDialogs.Answer;
        }
    }

    /// <summary>Stub only: how dialogs answer, and what they showed. Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubDialogs
    {
        /// <summary>The answer of DisplayDialog.</summary>
        public static bool Answer;

        /// <summary>The title of the last dialog.</summary>
        public static string LastTitle;

        /// <summary>The message of the last dialog.</summary>
        public static string LastMessage;

        /// <summary>How often EditorUtility.SetDirty was called.</summary>
        public static int DirtyCount;
    }

    /// <summary>A window of the Editor.</summary>
    public class EditorWindow : ScriptableObject
    {
        /// <summary>The title shown on the window's tab.</summary>
        public GUIContent titleContent { get; set; }

        /// <summary>The first window of type T, created (and sent OnEnable) if none exists.</summary>
        public static T GetWindow<T>(string title) where T : EditorWindow
        {
            StubEngine.ThrowIfNotMainThread("GetWindow");
            foreach (EditorWindow open in StubEditorState.Windows)
            {
                T existing = open as T;
                if (existing != null) return existing;
            }
            T window = CreateInstance<T>();
            window.titleContent = new GUIContent(title);
            StubEditorState.Windows.Add(window);
            StubEngine.Send(window, "OnEnable");
            return window;
        }

        /// <summary>Shows the window.</summary>
        public void Show()
        {
        }

        /// <summary>Closes the window (OnDisable, then OnDestroy).</summary>
        public void Close()
        {
            StubEngine.ThrowIfNotMainThread("Close");
            if (!StubEditorState.Windows.Remove(this)) return;
            StubEngine.Send(this, "OnDisable");
            StubEngine.Send(this, "OnDestroy");
            DestroyImmediate(this);
        }

        /// <summary>Redraws the window.</summary>
        public void Repaint()
        {
        }
    }

    /// <summary>Kinds of a help box.</summary>
    public enum MessageType
    {
        None = 0,
        Info = 1,
        Warning = 2,
        Error = 3,
    }

    /// <summary>Common GUI styles of the Editor.</summary>
    public sealed class EditorStyles
    {
        /// <summary>A bold label.</summary>
        public static GUIStyle boldLabel
        {
            get { return new GUIStyle(); }
        }
    }

    /// <summary>Auto-laid-out Editor controls (stub: controls return their inputs).</summary>
    public sealed class EditorGUILayout
    {
        /// <summary>A label.</summary>
        public static void LabelField(string label, params GUILayoutOption[] options)
        {
        }


        /// <summary>A label with a style.</summary>
        public static void LabelField(string label, GUIStyle style, params GUILayoutOption[] options)
        {
        }


        /// <summary>A multi-line text area; returns the edited text.</summary>
        public static string TextArea(string text, params GUILayoutOption[] options)
        {
            return text;
        }

        /// <summary>A selectable label (copyable text).</summary>
        public static void SelectableLabel(string text, params GUILayoutOption[] options)
        {
        }

        /// <summary>A popup; returns the selected index.</summary>
        public static int Popup(string label, int selectedIndex, string[] displayedOptions, params GUILayoutOption[] options)
        {
            return selectedIndex;
        }

        /// <summary>A help box.</summary>
        public static void HelpBox(string message, MessageType type)
        {
        }

        /// <summary>Begins a horizontal group.</summary>
        public static Rect BeginHorizontal(params GUILayoutOption[] options)
        {
            return new Rect();
        }

        /// <summary>Ends a horizontal group.</summary>
        public static void EndHorizontal()
        {
        }



        /// <summary>Begins a scroll view; returns the scroll position.</summary>
        public static Vector2 BeginScrollView(Vector2 scrollPosition, params GUILayoutOption[] options)
        {
            return scrollPosition;
        }

        /// <summary>Ends a scroll view.</summary>
        public static void EndScrollView()
        {
        }

    }
}

namespace UnityEditor
{
    /// <summary>Access to assets (stub: assets are registered with StubAssets).</summary>
    public sealed class AssetDatabase
    {
        /// <summary>GUIDs of the assets matching `filter` (stub: `t:TypeName` only; in registration order, as unordered as Unity's).</summary>
        public static string[] FindAssets(string filter)
        {
            StubEngine.ThrowIfNotMainThread("FindAssets");
            List<string> found = new List<string>();
            string type = filter != null && filter.StartsWith("t:", StringComparison.Ordinal) ? filter.Substring(2) : null;
            foreach (KeyValuePair<string, UnityEngine.Object> pair in StubAssets.ByPath)
            {
                if (type == null || pair.Value.GetType().Name == type) found.Add(pair.Key);
            }
            return found.ToArray();
        }

        /// <summary>The project-relative path of the asset with `guid` (stub: the guid is the path).</summary>
        public static string GUIDToAssetPath(string guid)
        {
            StubEngine.ThrowIfNotMainThread("GUIDToAssetPath");
            return guid;
        }

        /// <summary>The asset at `assetPath`, or null.</summary>
        public static T LoadAssetAtPath<T>(string assetPath) where T : UnityEngine.Object
        {
            StubEngine.ThrowIfNotMainThread("LoadAssetAtPath");
            UnityEngine.Object asset;
            return StubAssets.ByPath.TryGetValue(assetPath ?? "", out asset) ? asset as T : null;
        }

        /// <summary>The project-relative path of `asset`, or "" when it is no asset.</summary>
        public static string GetAssetPath(UnityEngine.Object asset)
        {
            StubEngine.ThrowIfNotMainThread("GetAssetPath");
            foreach (KeyValuePair<string, UnityEngine.Object> pair in StubAssets.ByPath)
            {
                if (ReferenceEquals(pair.Value, asset)) return pair.Key;
            }
            return "";
        }
    }

    /// <summary>Stub only: the assets AssetDatabase knows, by path (in registration order). Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubAssets
    {
        /// <summary>Assets by project-relative path.</summary>
        public static readonly Dictionary<string, UnityEngine.Object> ByPath = new Dictionary<string, UnityEngine.Object>();
    }

    /// <summary>Player settings (stub: the members the package reads and sets).</summary>
    public sealed class PlayerSettings : UnityEngine.Object
    {
        /// <summary>Android player settings.</summary>
        public static class Android
        {
            /// <summary>Internet Access = Require: the INTERNET permission is always in the manifest.</summary>
            public static bool forceInternetPermission
            {
                get
                {
                    StubEngine.ThrowIfNotMainThread("get_forceInternetPermission");
                    return StubEditorState.AndroidForceInternetPermission;
                }
                set
                {
                    StubEngine.ThrowIfNotMainThread("set_forceInternetPermission");
                    StubEditorState.AndroidForceInternetPermission = value;
                }
            }
        }
    }
}
