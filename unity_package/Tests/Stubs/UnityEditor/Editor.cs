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

    /// <summary>Editor application state (stub: isPlaying is settable).</summary>
    public sealed class EditorApplication
    {
        /// <summary>Whether the Editor is in Play Mode.</summary>
        public static bool isPlaying { get; set; }

    }

    /// <summary>Editor utility functions (stub: dialogs answer StubDialogs.Answer).</summary>
    public sealed class EditorUtility
    {
        /// <summary>Marks `target` changed, so the Editor saves it (stub: counted in StubDialogs.DirtyCount).</summary>
        public static void SetDirty(UnityEngine.Object target)
        {
            StubDialogs.DirtyCount++;
        }

        /// <summary>Shows a modal dialog; true when `ok` is pressed.</summary>
        public static bool DisplayDialog(string title, string message, string ok, string cancel = "")
        {
            StubDialogs.LastTitle = title;
            StubDialogs.LastMessage = message;
            return StubDialogs.Answer;
        }
    }

    /// <summary>Stub only: how dialogs answer, and what they showed. Not part of Unity's API.</summary>
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

        /// <summary>The first window of type T, created if none exists.</summary>
        public static T GetWindow<T>(string title) where T : EditorWindow
        {
            T window = CreateInstance<T>();
            window.titleContent = new GUIContent(title);
            return window;
        }

        /// <summary>Shows the window.</summary>
        public void Show()
        {
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
        /// <summary>GUIDs of the assets matching `filter` (stub: `t:TypeName` only).</summary>
        public static string[] FindAssets(string filter)
        {
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
            return guid;
        }

        /// <summary>The asset at `assetPath`, or null.</summary>
        public static T LoadAssetAtPath<T>(string assetPath) where T : UnityEngine.Object
        {
            UnityEngine.Object asset;
            return StubAssets.ByPath.TryGetValue(assetPath ?? "", out asset) ? asset as T : null;
        }
    }

    /// <summary>Stub only: the assets AssetDatabase knows, by path. Not part of Unity's API.</summary>
    public static class StubAssets
    {
        /// <summary>Assets by project-relative path.</summary>
        public static readonly Dictionary<string, UnityEngine.Object> ByPath = new Dictionary<string, UnityEngine.Object>();
    }
}
