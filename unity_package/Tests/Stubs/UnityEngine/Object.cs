// Stub of the UnityEngine scripting API, for compiling and running the package outside Unity.
// Only the members the package uses; every signature matches Unity's. Never compiled by Unity
// (see CoreAI.Tests.Stubs.asmdef: its define constraint is never set).
using System;
using System.Collections.Generic;

namespace UnityEngine
{
    /// <summary>Base class of everything Unity can reference.</summary>
    public class Object
    {
        private static readonly List<Object> DontDestroy = new List<Object>();

        /// <summary>The object's name.</summary>
        public string name { get; set; }

        /// <summary>Keeps the object alive across scene loads.</summary>
        public static void DontDestroyOnLoad(Object target)
        {
            if (target == null) throw new ArgumentNullException(nameof(target));
            DontDestroy.Add(target);
        }

        /// <summary>Destroys the object.</summary>
        public static void Destroy(Object obj)
        {
            DontDestroy.Remove(obj);
        }

    }

    /// <summary>Base class of everything attached to a GameObject.</summary>
    public class Component : Object
    {
        internal GameObject owner;

        /// <summary>The GameObject this component is attached to.</summary>
        public GameObject gameObject { get { return owner; } }
    }

    /// <summary>A component that can be enabled or disabled.</summary>
    public class Behaviour : Component
    {
        /// <summary>Enabled behaviours are updated.</summary>
        public bool enabled { get; set; } = true;
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
            return (T)Activator.CreateInstance(typeof(T), true);
        }

    }

    /// <summary>An entity in a scene.</summary>
    public sealed class GameObject : Object
    {
        private readonly List<Component> components = new List<Component>();

        /// <summary>Creates a GameObject named `name`.</summary>
        public GameObject(string name)
        {
            this.name = name;
        }

        /// <summary>Adds a component of type T.</summary>
        public T AddComponent<T>() where T : Component
        {
            T component = (T)Activator.CreateInstance(typeof(T), true);
            component.owner = this;
            components.Add(component);
            return component;
        }

    }
}
