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


    /// <summary>Shows a string field as a multi-line text area.</summary>
    [AttributeUsage(AttributeTargets.Field, Inherited = true, AllowMultiple = false)]
    public sealed class TextAreaAttribute : PropertyAttribute
    {
        /// <summary>The fewest lines shown.</summary>
        public readonly int minLines;

        /// <summary>The most lines shown before a scroll bar appears.</summary>
        public readonly int maxLines;

        /// <summary>A text area of minLines to maxLines lines.</summary>
        public TextAreaAttribute(int minLines, int maxLines)
        {
            this.minLines = minLines;
            this.maxLines = maxLines;
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

    /// <summary>The order of a script's Awake, OnEnable and Update among others (lower first; default 0).</summary>
    [AttributeUsage(AttributeTargets.Class)]
    public class DefaultExecutionOrder : Attribute
    {
        /// <summary>Run at `order`.</summary>
        public DefaultExecutionOrder(int order)
        {
            this.order = order;
        }

        /// <summary>The order.</summary>
        public int order { get; private set; }
    }


}
