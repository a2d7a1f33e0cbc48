using System;

namespace CoreAI.Runtime
{
    /// <summary>
    /// Keeps what only reflection reaches (Newtonsoft's DTO properties, converters, the launcher's state file) out of
    /// IL2CPP's managed code stripping. Unity's linker honours any attribute with this exact name, whatever its
    /// namespace, so CoreAI.Client and CoreAI.Hosting need no UnityEngine reference for it.
    /// </summary>
    [AttributeUsage(AttributeTargets.Assembly | AttributeTargets.Class | AttributeTargets.Struct | AttributeTargets.Enum
        | AttributeTargets.Constructor | AttributeTargets.Method | AttributeTargets.Property | AttributeTargets.Field
        | AttributeTargets.Interface | AttributeTargets.Delegate, Inherited = false)]
    internal sealed class PreserveAttribute : Attribute
    {
    }
}
