using System;

namespace UnityEngine
{
    /// <summary>Serialize a private field.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public sealed class SerializeField : Attribute
    {
    }

    /// <summary>Base class of attributes that change how a field is drawn in the Inspector.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public abstract class PropertyAttribute : Attribute
    {
    }

    /// <summary>A header above fields in the Inspector.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = true)]
    public class HeaderAttribute : PropertyAttribute
    {
        /// <summary>The header text.</summary>
        public readonly string header;

        /// <summary>Add a header above some fields in the Inspector.</summary>
        public HeaderAttribute(string header)
        {
            this.header = header;
        }
    }

    /// <summary>A tooltip for a field in the Inspector.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public class TooltipAttribute : PropertyAttribute
    {
        /// <summary>The tooltip text.</summary>
        public readonly string tooltip;

        /// <summary>Specify a tooltip for a field.</summary>
        public TooltipAttribute(string tooltip)
        {
            this.tooltip = tooltip;
        }
    }

    /// <summary>Restricts an int or float field to a range.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public sealed class RangeAttribute : PropertyAttribute
    {
        /// <summary>Lower bound.</summary>
        public readonly float min;

        /// <summary>Upper bound.</summary>
        public readonly float max;

        /// <summary>Restrict a field to the range [min, max].</summary>
        public RangeAttribute(float min, float max)
        {
            this.min = min;
            this.max = max;
        }
    }

    /// <summary>Restricts an int or float field to a minimum.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public sealed class MinAttribute : PropertyAttribute
    {
        /// <summary>The minimum allowed value.</summary>
        public readonly float min;

        /// <summary>Restrict a field to values of at least min.</summary>
        public MinAttribute(float min)
        {
            this.min = min;
        }
    }

    /// <summary>A multi-line text field in the Inspector.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public class TextAreaAttribute : PropertyAttribute
    {
        /// <summary>Edit a string with a text area.</summary>
        public TextAreaAttribute()
        {
        }
    }

    /// <summary>Adds a ScriptableObject type to the Assets/Create menu.</summary>
    [AttributeUsage(AttributeTargets.Class, Inherited = false, AllowMultiple = false)]
    public sealed class CreateAssetMenuAttribute : Attribute
    {
        /// <summary>The display name of the menu item.</summary>
        public string menuName { get; set; }

        /// <summary>The default file name of new instances.</summary>
        public string fileName { get; set; }

        /// <summary>The position of the menu item.</summary>
        public int order { get; set; }
    }

    /// <summary>Prevents a MonoBehaviour from being added twice to one GameObject.</summary>
    [AttributeUsage(AttributeTargets.Class, Inherited = false, AllowMultiple = false)]
    public sealed class DisallowMultipleComponent : Attribute
    {
    }

    /// <summary>Places the script in the Component menu.</summary>
    [AttributeUsage(AttributeTargets.Class, Inherited = true, AllowMultiple = false)]
    public sealed class AddComponentMenu : Attribute
    {
        /// <summary>Place the script in the Component menu under `menuName`.</summary>
        public AddComponentMenu(string menuName)
        {
        }
    }

    /// <summary>When a RuntimeInitializeOnLoadMethod method is called.</summary>
    public enum RuntimeInitializeLoadType
    {
        AfterSceneLoad = 0,
        BeforeSceneLoad = 1,
        AfterAssembliesLoaded = 2,
        BeforeSplashScreen = 3,
        SubsystemRegistration = 4,
    }

    /// <summary>Calls a static method when the runtime has loaded.</summary>
    [AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
    public class RuntimeInitializeOnLoadMethodAttribute : Attribute
    {
        /// <summary>Call after the first scene has loaded.</summary>
        public RuntimeInitializeOnLoadMethodAttribute()
        {
            loadType = RuntimeInitializeLoadType.AfterSceneLoad;
        }

        /// <summary>Call at `loadType`.</summary>
        public RuntimeInitializeOnLoadMethodAttribute(RuntimeInitializeLoadType loadType)
        {
            this.loadType = loadType;
        }

        /// <summary>When the method is called.</summary>
        public RuntimeInitializeLoadType loadType { get; set; }
    }
}
