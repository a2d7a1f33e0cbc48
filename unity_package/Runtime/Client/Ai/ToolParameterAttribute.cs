using System;
using Newtonsoft.Json.Converters;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>Describes an argument of a game tool (a public field or property of its TArgs) for the model.</summary>
    [AttributeUsage(AttributeTargets.Field | AttributeTargets.Property)]
    public sealed class ToolParameterAttribute : Attribute
    {
        /// <summary>An argument with this description.</summary>
        public ToolParameterAttribute(string description)
        {
            Description = description ?? "";
        }

        /// <summary>What the argument means (shown to the model).</summary>
        public string Description { get; }

        /// <summary>True: the model may leave it out (Nullable&lt;T&gt; arguments are optional anyway).</summary>
        public bool Optional { get; set; }
    }
}
