using System;

namespace UnityEngine.Scripting
{
    /// <summary>Keeps a type or member from being removed by code stripping (IL2CPP's managed linker).</summary>
    [AttributeUsage(AttributeTargets.Assembly | AttributeTargets.Class | AttributeTargets.Struct | AttributeTargets.Enum
        | AttributeTargets.Constructor | AttributeTargets.Method | AttributeTargets.Property | AttributeTargets.Field
        | AttributeTargets.Event | AttributeTargets.Interface | AttributeTargets.Delegate, Inherited = false)]
    public class PreserveAttribute : Attribute
    {
    }
}

namespace UnityEngine
{
    /// <summary>When a RuntimeInitializeOnLoadMethod runs.</summary>
    public enum RuntimeInitializeLoadType
    {
        /// <summary>After the first scene's objects are loaded and awoken.</summary>
        AfterSceneLoad = 0,
        /// <summary>Before the first scene is loaded.</summary>
        BeforeSceneLoad = 1,
        /// <summary>When all assemblies are loaded.</summary>
        AfterAssembliesLoaded = 2,
        /// <summary>Before the splash screen is shown.</summary>
        BeforeSplashScreen = 3,
        /// <summary>First of all, for subsystems (and for resetting static state when domain reload is off).</summary>
        SubsystemRegistration = 4,
    }

    /// <summary>Runs a static method when the player (or Play Mode) starts, without any object in the scene.</summary>
    [AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
    public class RuntimeInitializeOnLoadMethodAttribute : Scripting.PreserveAttribute
    {
        /// <summary>Runs after the scene loaded.</summary>
        public RuntimeInitializeOnLoadMethodAttribute()
        {
            loadType = RuntimeInitializeLoadType.AfterSceneLoad;
        }

        /// <summary>Runs at `loadType`.</summary>
        public RuntimeInitializeOnLoadMethodAttribute(RuntimeInitializeLoadType loadType)
        {
            this.loadType = loadType;
        }

        /// <summary>When the method runs.</summary>
        public RuntimeInitializeLoadType loadType { get; private set; }
    }
}
