// Stub only, not part of Unity's API: the editor's Play Mode transitions and domain reloads, in Unity's order, so
// tests can press Play and Stop and edit a script the way a Unity developer does.
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Runtime.CompilerServices;
using UnityEngine;

namespace UnityEditor
{
    /// <summary>Stub only: Play and Stop. Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubPlayMode
    {
        /// <summary>
        /// Press Play: ExitingEditMode; a domain reload when `reloadDomain` (Unity's default; off is "Enter Play Mode
        /// Options" without reload); isPlaying; the RuntimeInitializeOnLoadMethods and the scene's Awake/OnEnable;
        /// EnteredPlayMode.
        /// </summary>
        public static void Enter(bool reloadDomain)
        {
            EditorApplication.RaisePlayModeStateChanged(PlayModeStateChange.ExitingEditMode);
            if (reloadDomain) StubDomain.Reload();
            StubEditorState.IsPlaying = true;
            StubEngine.StartPlayer();
            EditorApplication.RaisePlayModeStateChanged(PlayModeStateChange.EnteredPlayMode);
        }

        /// <summary>
        /// Press Stop: ExitingPlayMode; what a quitting player does (OnApplicationQuit, Application.quitting, every
        /// scene object destroyed with OnDisable and OnDestroy, isPlaying false); EnteredEditMode.
        /// </summary>
        public static void Exit()
        {
            EditorApplication.RaisePlayModeStateChanged(PlayModeStateChange.ExitingPlayMode);
            StubEngine.QuitPlayer();
            StubEditorState.IsPlaying = false;
            EditorApplication.RaisePlayModeStateChanged(PlayModeStateChange.EnteredEditMode);
        }
    }

    /// <summary>Stub only: the editor loading scripts, and reloading them (a domain reload). Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubDomain
    {
        /// <summary>The editor's first script load: every [InitializeOnLoad] static constructor and [InitializeOnLoadMethod].</summary>
        public static void LoadScripts()
        {
            StubEngine.ThrowIfNotMainThread("LoadScripts");
            RunInitializeOnLoad();
        }

        /// <summary>
        /// A domain reload (a script edit, or Play with domain reload on): beforeAssemblyReload; OnDisable of enabled
        /// scripts and open windows; all static state of scripts dropped and re-initialized, unserialized fields of
        /// live objects reset; [InitializeOnLoad] code runs; OnEnable again (windows; scene scripts in Play Mode);
        /// afterAssemblyReload (seen only by handlers registered after the reload, as in Unity).
        /// </summary>
        public static void Reload()
        {
            StubEngine.ThrowIfNotMainThread("Reload");
            AssemblyReloadEvents.RaiseBefore();
            List<Component> disabled = StubEngine.DisableAllForReload();
            List<EditorWindow> windows = new List<EditorWindow>(StubEditorState.Windows);
            foreach (EditorWindow window in windows) StubEngine.Send(window, "OnDisable");
            StubEngine.ResetScriptDomain(windows.ConvertAll(w => (object)w));
            RunInitializeOnLoad();
            foreach (EditorWindow window in windows) StubEngine.Send(window, "OnEnable");
            if (StubState.IsPlaying) StubEngine.EnableAfterReload(disabled);
            AssemblyReloadEvents.RaiseAfter();
        }

        private static void RunInitializeOnLoad()
        {
            foreach (Assembly assembly in StubEngine.ScriptAssemblies(false))
            {
                foreach (Type type in StubEngine.TypesOf(assembly))
                {
                    if (type.ContainsGenericParameters) continue;
                    if (type.IsDefined(typeof(InitializeOnLoadAttribute), false)) RuntimeHelpers.RunClassConstructor(type.TypeHandle);
                    foreach (MethodInfo method in type.GetMethods(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
                    {
                        if (!method.IsDefined(typeof(InitializeOnLoadMethodAttribute), false) || method.GetParameters().Length != 0) continue;
                        try
                        {
                            method.Invoke(null, null);
                        }
                        catch (TargetInvocationException e)
                        {
                            Debug.LogException(e.InnerException ?? e);
                        }
                    }
                }
            }
        }
    }
}
