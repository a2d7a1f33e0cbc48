// Stub of the UnityEngine scripting API, for compiling and running the package outside Unity.
// Only the members the package uses; every signature matches Unity's. Never compiled by Unity
// (see CoreAI.Tests.Stubs.asmdef: its define constraint is never set). Unity's rules that the compiler
// cannot see are enforced here: main-thread-only members throw off the main thread, a destroyed object
// compares equal to null, DontDestroyOnLoad ignores objects that are not at the root.
using System;
using System.Collections;
using System.Collections.Generic;

namespace UnityEngine
{
    /// <summary>Base class of everything Unity can reference.</summary>
    public class Object
    {
        private string objectName;

        internal bool destroyed;

        /// <summary>The object's name.</summary>
        public string name
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_name");
                return objectName;
            }
            set
            {
                StubEngine.ThrowIfNotMainThread("set_name");
                objectName = value;
            }
        }

        /// <summary>Keeps the object alive across scene loads (root GameObjects, or components on them, only).</summary>
        public static void DontDestroyOnLoad(Object target)
        {
            StubEngine.ThrowIfNotMainThread("DontDestroyOnLoad");
            if (target == null) throw new ArgumentNullException(nameof(target));
            GameObject gameObject = target as GameObject ?? (target is Component ? ((Component)target).gameObject : null);
            if (gameObject != null && gameObject.transform.parent != null)
            {
                Debug.LogWarning("DontDestroyOnLoad only works for root GameObjects or components on root GameObjects.");
                return;
            }
            StubEngine.KeepAcrossScenes(gameObject != null ? (Object)gameObject : target);
        }

        /// <summary>Destroys the object (a GameObject with all its components and children; a component alone).</summary>
        public static void Destroy(Object obj)
        {
            StubEngine.ThrowIfNotMainThread("Destroy");
            if ((object)obj == null || obj.destroyed) return;
            StubEngine.DestroyNow(obj);
        }

        /// <summary>Destroys the object at once (editor code).</summary>
        public static void DestroyImmediate(Object obj)
        {
            Destroy(obj);
        }

        /// <summary>True unless the object was destroyed (or is null).</summary>
        public static implicit operator bool(Object exists)
        {
            return !CompareBaseObjects(exists, null);
        }

        /// <summary>Unity's equality: a destroyed object equals null.</summary>
        public static bool operator ==(Object x, Object y)
        {
            return CompareBaseObjects(x, y);
        }

        /// <summary>Unity's inequality: a destroyed object equals null.</summary>
        public static bool operator !=(Object x, Object y)
        {
            return !CompareBaseObjects(x, y);
        }

        /// <summary>Equality as the == operator.</summary>
        public override bool Equals(object other)
        {
            if (other != null && !(other is Object)) return false;
            return CompareBaseObjects(this, other as Object);
        }

        /// <summary>Identity hash.</summary>
        public override int GetHashCode()
        {
            return System.Runtime.CompilerServices.RuntimeHelpers.GetHashCode(this);
        }

        private static bool CompareBaseObjects(Object lhs, Object rhs)
        {
            bool lhsNull = (object)lhs == null || lhs.destroyed;
            bool rhsNull = (object)rhs == null || rhs.destroyed;
            if (lhsNull && rhsNull) return true;
            if (lhsNull || rhsNull) return false;
            return ReferenceEquals(lhs, rhs);
        }
    }

    /// <summary>Base class of everything attached to a GameObject.</summary>
    public class Component : Object
    {
        internal GameObject owner;

        /// <summary>The GameObject this component is attached to.</summary>
        public GameObject gameObject
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_gameObject");
                return owner;
            }
        }

        /// <summary>The Transform of the GameObject this component is attached to.</summary>
        public Transform transform
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_transform");
                return owner == null ? null : owner.transform;
            }
        }

        /// <summary>The component of type T on the same GameObject, or null.</summary>
        public T GetComponent<T>()
        {
            StubEngine.ThrowIfNotMainThread("GetComponent");
            return owner == null ? default(T) : owner.GetComponent<T>();
        }
    }

    /// <summary>Position, rotation, scale and parent of a GameObject (stub: the parent only).</summary>
    public class Transform : Component, IEnumerable
    {
        private Transform parentTransform;
        private readonly List<Transform> children = new List<Transform>();

        /// <summary>The parent of the transform (null at the root).</summary>
        public Transform parent
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_parent");
                return parentTransform;
            }
            set { SetParent(value); }
        }

        /// <summary>The topmost transform in the hierarchy.</summary>
        public Transform root
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_root");
                Transform current = this;
                while (current.parentTransform != null) current = current.parentTransform;
                return current;
            }
        }

        /// <summary>Sets the parent of the transform.</summary>
        public void SetParent(Transform p)
        {
            SetParent(p, true);
        }

        /// <summary>Sets the parent of the transform.</summary>
        public void SetParent(Transform parent, bool worldPositionStays)
        {
            StubEngine.ThrowIfNotMainThread("SetParent");
            if (parentTransform != null) parentTransform.children.Remove(this);
            parentTransform = parent;
            if (parent != null) parent.children.Add(this);
        }

        /// <summary>The child transforms.</summary>
        public IEnumerator GetEnumerator()
        {
            return new List<Transform>(children).GetEnumerator();
        }
    }

    /// <summary>A component that can be enabled or disabled.</summary>
    public class Behaviour : Component
    {
        private bool isEnabled = true;

        /// <summary>Enabled behaviours are updated; toggling it runs OnEnable/OnDisable where Unity would.</summary>
        public bool enabled
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_enabled");
                return isEnabled;
            }
            set
            {
                StubEngine.ThrowIfNotMainThread("set_enabled");
                if (value == isEnabled) return;
                isEnabled = value;
                StubEngine.EnabledChanged(this, value);
            }
        }

        internal bool IsEnabledNoCheck
        {
            get { return isEnabled; }
        }
    }

    /// <summary>Base class of scripts attached to GameObjects.</summary>
    public class MonoBehaviour : Behaviour
    {
    }

    /// <summary>A data container asset.</summary>
    public class ScriptableObject : Object
    {
        /// <summary>Creates an instance of a scriptable object.</summary>
        public static T CreateInstance<T>() where T : ScriptableObject
        {
            StubEngine.ThrowIfNotMainThread("CreateInstance");
            return (T)Activator.CreateInstance(typeof(T), true);
        }
    }

    /// <summary>An entity in a scene.</summary>
    public sealed class GameObject : Object
    {
        private readonly List<Component> components = new List<Component>();
        private readonly Transform ownTransform;

        /// <summary>Creates a GameObject named `name` (at the root of the scene).</summary>
        public GameObject(string name)
        {
            StubEngine.ThrowIfNotMainThread("GameObject..ctor");
            this.name = name;
            ownTransform = new Transform();
            ownTransform.owner = this;
            components.Add(ownTransform);
        }

        /// <summary>The Transform attached to this GameObject.</summary>
        public Transform transform
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_transform");
                return ownTransform;
            }
        }

        /// <summary>Adds a component of type T (stub: Awake and OnEnable run when a driver starts the scene, see StubEngine).</summary>
        public T AddComponent<T>() where T : Component
        {
            StubEngine.ThrowIfNotMainThread("AddComponent");
            T component = (T)Activator.CreateInstance(typeof(T), true);
            component.owner = this;
            components.Add(component);
            StubEngine.Register(component);
            return component;
        }

        /// <summary>The component of type T, or null.</summary>
        public T GetComponent<T>()
        {
            StubEngine.ThrowIfNotMainThread("GetComponent");
            foreach (Component c in components)
            {
                if (!c.destroyed && c is T) return (T)(object)c;
            }
            return default(T);
        }

        internal List<Component> Components
        {
            get { return components; }
        }
    }
}
