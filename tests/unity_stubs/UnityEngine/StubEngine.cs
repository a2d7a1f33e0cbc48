// Stub only, not part of Unity's API: the engine behind the stubbed scripting API. It enforces what Unity enforces
// at run time and lets tests drive what Unity drives: the main thread (and its UnitySynchronizationContext, pumped
// by frames), the scene's components and their lifecycle messages, a player's start and quit, and the reset of
// script state a domain reload causes (UnityEditor.StubDomain orchestrates the editor's side of a reload).
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Threading;

namespace UnityEngine
{
    /// <summary>Stub only: the engine's state and the drivers tests use. Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubEngine
    {
        private const string MainThreadMessage = " can only be called from the main thread.\n"
            + "Constructors and field initializers will be executed from the loading thread when loading a scene.\n"
            + "Don't use this function in the constructor or field initializers, instead move initialization code to the Awake or Start function.";

        private static readonly object Gate = new object();
        private static readonly List<Component> Live = new List<Component>();
        private static readonly HashSet<object> Awoken = new HashSet<object>(ReferenceComparer.Instance);
        private static readonly HashSet<object> Enabled = new HashSet<object>(ReferenceComparer.Instance);
        private static readonly HashSet<object> Kept = new HashSet<object>(ReferenceComparer.Instance);
        private static readonly List<string> Exceptions = new List<string>();
        private static int mainThreadId = -1;
        private static UnitySynchronizationContext context;

        /// <summary>The managed id of Unity's main thread (-1 before <see cref="BecomeMainThread"/>).</summary>
        public static int MainThreadId
        {
            get { return Volatile.Read(ref mainThreadId); }
        }

        /// <summary>True on the main thread.</summary>
        public static bool IsMainThread
        {
            get { return Thread.CurrentThread.ManagedThreadId == MainThreadId; }
        }

        /// <summary>Unity's main-thread SynchronizationContext (what SynchronizationContext.Current is on the main thread).</summary>
        public static SynchronizationContext MainThreadContext
        {
            get { return context; }
        }

        /// <summary>Make the calling thread Unity's main thread: main-thread-only members work here only, and its
        /// SynchronizationContext is Unity's (posted work runs when <see cref="RunFrame"/> is called).</summary>
        public static void BecomeMainThread()
        {
            int id = Thread.CurrentThread.ManagedThreadId;
            Volatile.Write(ref mainThreadId, id);
            if (context == null || context.ThreadId != id) context = new UnitySynchronizationContext(id);
            SynchronizationContext.SetSynchronizationContext(context);
        }

        /// <summary>What Unity's native layer does for main-thread-only members: a UnityException elsewhere.</summary>
        public static void ThrowIfNotMainThread(string member)
        {
            int main = MainThreadId;
            if (main < 0) throw new InvalidOperationException("stub: call StubEngine.BecomeMainThread() on the test's main thread first");
            if (Thread.CurrentThread.ManagedThreadId != main) throw new UnityException(member + MainThreadMessage);
        }

        /// <summary>Exceptions that lifecycle messages and main-thread work threw (Unity logs them and goes on), oldest first.</summary>
        public static string[] UnhandledExceptions
        {
            get { lock (Gate) return Exceptions.ToArray(); }
        }

        /// <summary>One frame on the main thread: Update of every enabled, awoken behaviour, then the work posted to
        /// the main thread's context before this frame; returns how many posted items ran.</summary>
        public static int RunFrame()
        {
            ThrowIfNotMainThread("RunFrame");
            foreach (Component c in Snapshot())
            {
                Behaviour b = c as Behaviour;
                if (IsAwoken(c) && (b == null || b.IsEnabledNoCheck) && !c.destroyed) Send(c, "Update");
            }
            return context == null ? 0 : context.ExecuteTasks();
        }

        /// <summary>Awake, then OnEnable (when enabled), for every component not yet awoken, in creation order (a scene loading).</summary>
        public static void StartScene()
        {
            ThrowIfNotMainThread("StartScene");
            foreach (Component c in Snapshot())
            {
                if (c.destroyed || IsAwoken(c) || c is Transform) continue;
                lock (Gate) Awoken.Add(c);
                Send(c, "Awake");
                Behaviour b = c as Behaviour;
                if (!c.destroyed && (b == null || b.IsEnabledNoCheck)) CallOnEnable(c);
            }
        }

        /// <summary>A player starting: isPlaying, the RuntimeInitializeOnLoadMethods before the scene, the scene, then after it.</summary>
        public static void StartPlayer()
        {
            ThrowIfNotMainThread("StartPlayer");
            StubState.IsPlaying = true;
            RunRuntimeInitializers(RuntimeInitializeLoadType.SubsystemRegistration);
            RunRuntimeInitializers(RuntimeInitializeLoadType.AfterAssembliesLoaded);
            RunRuntimeInitializers(RuntimeInitializeLoadType.BeforeSplashScreen);
            RunRuntimeInitializers(RuntimeInitializeLoadType.BeforeSceneLoad);
            StartScene();
            RunRuntimeInitializers(RuntimeInitializeLoadType.AfterSceneLoad);
        }

        /// <summary>A player quitting (the editor leaving Play Mode does the same): OnApplicationQuit everywhere,
        /// Application.quitting, then every object is destroyed (OnDisable, OnDestroy) and isPlaying turns false.</summary>
        public static void QuitPlayer()
        {
            ThrowIfNotMainThread("QuitPlayer");
            foreach (Component c in Snapshot())
            {
                if (!c.destroyed && IsAwoken(c)) Send(c, "OnApplicationQuit");
            }
            try
            {
                Application.RaiseQuitting();
            }
            catch (Exception e)
            {
                Record(e);
            }
            foreach (Component c in Snapshot())
            {
                if (!c.destroyed && c.owner != null && !c.owner.destroyed) DestroyNow(c.owner);
            }
            lock (Gate) Kept.Clear();
            StubState.IsPlaying = false;
        }

        /// <summary>Loading another scene: every object not kept by DontDestroyOnLoad is destroyed.</summary>
        public static void LoadAnotherScene()
        {
            ThrowIfNotMainThread("LoadAnotherScene");
            foreach (Component c in Snapshot())
            {
                if (c.destroyed || c.owner == null || c.owner.destroyed) continue;
                if (!IsKeptAcrossScenes(c.owner.transform.root.gameObject)) DestroyNow(c.owner);
            }
        }

        /// <summary>An empty scene, as in a freshly started editor: every object is destroyed (those kept across scenes too).</summary>
        public static void DestroyEverything()
        {
            ThrowIfNotMainThread("DestroyEverything");
            foreach (Component c in Snapshot())
            {
                if (!c.destroyed && c.owner != null && !c.owner.destroyed) DestroyNow(c.owner);
            }
            lock (Gate) Kept.Clear();
        }

        /// <summary>True when `gameObject` (a root) was passed to DontDestroyOnLoad.</summary>
        public static bool IsKeptAcrossScenes(GameObject gameObject)
        {
            lock (Gate) return gameObject != null && Kept.Contains(gameObject);
        }

        /// <summary>True once `component` got Awake (and was not destroyed).</summary>
        public static bool IsAlive(Component component)
        {
            return (object)component != null && !component.destroyed && IsAwoken(component);
        }

        /// <summary>Calls the message `method` (Awake, OnEnable, …; any visibility, no arguments) on `target` if it has
        /// one, as Unity does: an exception is logged (Debug.LogException) and recorded, not thrown. True when it existed.</summary>
        public static bool Send(object target, string method)
        {
            MethodInfo info = FindMessage(target.GetType(), method);
            if (info == null) return false;
            try
            {
                info.Invoke(target, null);
            }
            catch (TargetInvocationException e)
            {
                Record(e.InnerException ?? e);
            }
            return true;
        }

        /// <summary>
        /// What a domain reload does to script state: every static field of script and engine-script assemblies (not the
        /// engine's own state, marked [StubEngineState]) is cleared and its type initializer runs again; every live
        /// component's fields that Unity does not serialize get the values of a freshly constructed instance.
        /// `extraTargets` (editor windows) are treated like components.
        /// </summary>
        public static void ResetScriptDomain(IEnumerable<object> extraTargets)
        {
            ThrowIfNotMainThread("ResetScriptDomain");
            List<object> targets = new List<object>();
            foreach (Component c in Snapshot())
            {
                if (!c.destroyed && !(c is Transform)) targets.Add(c);
            }
            if (extraTargets != null) targets.AddRange(extraTargets);
            foreach (object target in targets) ResetUnserializedFields(target);
            List<Type> types = new List<Type>();
            foreach (Assembly assembly in ScriptAssemblies(true)) types.AddRange(TypesOf(assembly));
            foreach (Type type in types) ClearStatics(type);
            foreach (Type type in types)
            {
                if (type.TypeInitializer == null || type.ContainsGenericParameters || IsEngineState(type)) continue;
                try
                {
                    type.TypeInitializer.Invoke(null, null);
                }
                catch (TargetInvocationException e)
                {
                    Record(e.InnerException ?? e);
                }
            }
        }

        /// <summary>Assemblies with scripts (the package's, the game's, tests'); with the stub engine's own when asked.</summary>
        public static List<Assembly> ScriptAssemblies(bool withEngine)
        {
            List<Assembly> found = new List<Assembly>();
            foreach (Assembly assembly in AppDomain.CurrentDomain.GetAssemblies())
            {
                string name = assembly.GetName().Name;
                bool engine = name == "UnityEngine" || name == "UnityEditor";
                if (name.StartsWith("CoreAI.", StringComparison.Ordinal) || (withEngine && engine)) found.Add(assembly);
            }
            return found;
        }

        /// <summary>Every type of `assembly` that loads.</summary>
        public static Type[] TypesOf(Assembly assembly)
        {
            try
            {
                return assembly.GetTypes();
            }
            catch (ReflectionTypeLoadException e)
            {
                return Array.FindAll(e.Types, t => t != null);
            }
        }

        internal static void Register(Component component)
        {
            lock (Gate) Live.Add(component);
        }

        internal static void KeepAcrossScenes(Object target)
        {
            lock (Gate) Kept.Add(target);
        }

        internal static void EnabledChanged(Behaviour behaviour, bool enabled)
        {
            if (!IsAwoken(behaviour) || !StubState.IsPlaying) return;
            if (enabled) CallOnEnable(behaviour);
            else CallOnDisable(behaviour);
        }

        internal static void DestroyNow(Object obj)
        {
            GameObject gameObject = obj as GameObject;
            if (gameObject != null)
            {
                foreach (object child in gameObject.transform)
                {
                    Transform t = (Transform)child;
                    if (t.owner != null) DestroyNow(t.owner);
                }
                foreach (Component c in new List<Component>(gameObject.Components)) DestroyComponent(c);
                gameObject.destroyed = true;
                lock (Gate) Kept.Remove(gameObject);
                return;
            }
            Component component = obj as Component;
            if (component != null) DestroyComponent(component);
            else obj.destroyed = true;
        }

        internal static void Record(Exception e)
        {
            lock (Gate) Exceptions.Add(e.GetType().Name + ": " + e.Message);
            Debug.LogException(e);
        }

        private static void DestroyComponent(Component c)
        {
            if (c.destroyed) return;
            if (IsEnabledCalled(c)) CallOnDisable(c);
            if (IsAwoken(c)) Send(c, "OnDestroy");
            c.destroyed = true;
            lock (Gate)
            {
                Live.Remove(c);
                Awoken.Remove(c);
                Enabled.Remove(c);
            }
        }

        private static void CallOnEnable(Component c)
        {
            lock (Gate)
            {
                if (!Enabled.Add(c)) return;
            }
            Send(c, "OnEnable");
        }

        private static void CallOnDisable(Component c)
        {
            lock (Gate)
            {
                if (!Enabled.Remove(c)) return;
            }
            Send(c, "OnDisable");
        }

        /// <summary>Stub only: OnDisable on every enabled component (before a domain reload); returns them.</summary>
        public static List<Component> DisableAllForReload()
        {
            ThrowIfNotMainThread("DisableAllForReload");
            List<Component> disabled = new List<Component>();
            foreach (Component c in Snapshot())
            {
                if (!c.destroyed && IsEnabledCalled(c))
                {
                    CallOnDisable(c);
                    disabled.Add(c);
                }
            }
            return disabled;
        }

        /// <summary>Stub only: OnEnable on `components` again (after a domain reload in Play Mode).</summary>
        public static void EnableAfterReload(IEnumerable<Component> components)
        {
            ThrowIfNotMainThread("EnableAfterReload");
            foreach (Component c in components)
            {
                if (!c.destroyed) CallOnEnable(c);
            }
        }

        private static bool IsAwoken(object c)
        {
            lock (Gate) return Awoken.Contains(c);
        }

        private static bool IsEnabledCalled(object c)
        {
            lock (Gate) return Enabled.Contains(c);
        }

        /// <summary>The live components in the order Unity runs them: by DefaultExecutionOrder, then creation.</summary>
        private static List<Component> Snapshot()
        {
            List<Component> live;
            lock (Gate) live = new List<Component>(Live);
            List<KeyValuePair<int, Component>> ordered = new List<KeyValuePair<int, Component>>();
            for (int i = 0; i < live.Count; i++) ordered.Add(new KeyValuePair<int, Component>(i, live[i]));
            ordered.Sort((a, b) =>
            {
                int byOrder = ExecutionOrder(a.Value).CompareTo(ExecutionOrder(b.Value));
                return byOrder != 0 ? byOrder : a.Key.CompareTo(b.Key);
            });
            return ordered.ConvertAll(pair => pair.Value);
        }

        private static int ExecutionOrder(Component component)
        {
            object[] found = component.GetType().GetCustomAttributes(typeof(DefaultExecutionOrder), true);
            return found.Length == 0 ? 0 : ((DefaultExecutionOrder)found[0]).order;
        }

        private static MethodInfo FindMessage(Type type, string method)
        {
            for (Type t = type; t != null && t != typeof(MonoBehaviour) && t != typeof(object); t = t.BaseType)
            {
                MethodInfo info = t.GetMethod(method, BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly,
                    null, Type.EmptyTypes, null);
                if (info != null) return info;
            }
            return null;
        }

        private static void RunRuntimeInitializers(RuntimeInitializeLoadType when)
        {
            foreach (Assembly assembly in ScriptAssemblies(false))
            {
                foreach (Type type in TypesOf(assembly))
                {
                    if (type.ContainsGenericParameters) continue;
                    foreach (MethodInfo method in type.GetMethods(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
                    {
                        var attribute = (RuntimeInitializeOnLoadMethodAttribute)Attribute.GetCustomAttribute(method, typeof(RuntimeInitializeOnLoadMethodAttribute));
                        if (attribute == null || attribute.loadType != when || method.GetParameters().Length != 0) continue;
                        try
                        {
                            method.Invoke(null, null);
                        }
                        catch (TargetInvocationException e)
                        {
                            Record(e.InnerException ?? e);
                        }
                    }
                }
            }
        }

        private static bool IsEngineState(Type type)
        {
            for (Type t = type; t != null; t = t.DeclaringType)
            {
                if (t.IsDefined(typeof(StubEngineStateAttribute), false)) return true;
            }
            return false;
        }

        private static void ClearStatics(Type type)
        {
            if (type.ContainsGenericParameters || IsEngineState(type) || type.Name.StartsWith("<PrivateImplementationDetails>", StringComparison.Ordinal)) return;
            foreach (FieldInfo field in type.GetFields(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
            {
                if (field.IsLiteral || (field.Attributes & FieldAttributes.HasFieldRVA) != 0) continue;
                if (field.IsDefined(typeof(ThreadStaticAttribute), false)) continue;
                try
                {
                    field.SetValue(null, field.FieldType.IsValueType ? Activator.CreateInstance(field.FieldType) : null);
                }
                catch (FieldAccessException)
                {
                }
            }
        }

        private static void ResetUnserializedFields(object target)
        {
            object fresh;
            try
            {
                fresh = Activator.CreateInstance(target.GetType(), true);
            }
            catch (MissingMethodException)
            {
                fresh = Uninitialized(target.GetType());
            }
            for (Type t = target.GetType(); t != null && !IsEngineType(t); t = t.BaseType)
            {
                foreach (FieldInfo field in t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
                {
                    if (!UnitySerializes(field)) field.SetValue(target, field.GetValue(fresh));
                }
            }
        }

        private static object Uninitialized(Type type)
        {
            return System.Runtime.Serialization.FormatterServices.GetUninitializedObject(type);
        }

        private static bool IsEngineType(Type t)
        {
            string assembly = t.Assembly.GetName().Name;
            return assembly == "UnityEngine" || assembly == "UnityEditor" || t == typeof(object);
        }

        private static bool UnitySerializes(FieldInfo field)
        {
            if (field.IsInitOnly || field.IsNotSerialized) return false;
            if (!field.IsPublic && !field.IsDefined(typeof(SerializeField), false)) return false;
            return SerializableType(field.FieldType);
        }

        private static bool SerializableType(Type type)
        {
            if (type.IsPrimitive || type.IsEnum || type == typeof(string)) return true;
            if (typeof(Object).IsAssignableFrom(type)) return true;
            if (type == typeof(Vector2) || type == typeof(Rect)) return true;
            if (type.IsArray) return type.GetArrayRank() == 1 && SerializableType(type.GetElementType());
            if (type.IsGenericType && type.GetGenericTypeDefinition() == typeof(List<>)) return SerializableType(type.GetGenericArguments()[0]);
            return !type.IsAbstract && !type.IsInterface && !type.IsGenericType && type.IsSerializable
                && !typeof(Delegate).IsAssignableFrom(type);
        }

        private sealed class ReferenceComparer : IEqualityComparer<object>
        {
            public static readonly ReferenceComparer Instance = new ReferenceComparer();

            public new bool Equals(object x, object y)
            {
                return ReferenceEquals(x, y);
            }

            public int GetHashCode(object obj)
            {
                return RuntimeHelpers.GetHashCode(obj);
            }
        }
    }

    /// <summary>Unity's main-thread context (internal in Unity too): posts run when the player loop runs a frame.</summary>
    internal sealed class UnitySynchronizationContext : SynchronizationContext
    {
        private readonly Queue<KeyValuePair<SendOrPostCallback, object>> queue = new Queue<KeyValuePair<SendOrPostCallback, object>>();

        public UnitySynchronizationContext(int threadId)
        {
            ThreadId = threadId;
        }

        public int ThreadId { get; private set; }

        public override void Post(SendOrPostCallback d, object state)
        {
            lock (queue) queue.Enqueue(new KeyValuePair<SendOrPostCallback, object>(d, state));
        }

        public override void Send(SendOrPostCallback d, object state)
        {
            if (Thread.CurrentThread.ManagedThreadId == ThreadId)
            {
                d(state);
                return;
            }
            using (ManualResetEventSlim done = new ManualResetEventSlim())
            {
                Post(s =>
                {
                    try
                    {
                        d(s);
                    }
                    finally
                    {
                        done.Set();
                    }
                }, state);
                done.Wait();
            }
        }

        public override SynchronizationContext CreateCopy()
        {
            return this;
        }

        /// <summary>Runs what was posted before this call (posts made meanwhile wait for the next frame).</summary>
        public int ExecuteTasks()
        {
            KeyValuePair<SendOrPostCallback, object>[] batch;
            lock (queue)
            {
                batch = queue.ToArray();
                queue.Clear();
            }
            foreach (KeyValuePair<SendOrPostCallback, object> item in batch)
            {
                try
                {
                    item.Key(item.Value);
                }
                catch (Exception e)
                {
                    StubEngine.Record(e);
                }
            }
            return batch.Length;
        }
    }
}
