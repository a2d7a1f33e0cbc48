using System;
using System.Collections.Generic;

namespace CoreAI.Ai
{
    /// <summary>A store that keeps versions itself (the runtime does); the extension methods use it when present.</summary>
    public interface IAgentMemoryVersionStore
    {
        /// <summary>Retained versions, oldest first.</summary>
        IReadOnlyList<AgentMemoryVersion> ListVersions(string roleId);

        /// <summary>Restore a version (recorded as a new "revert" version).</summary>
        /// <exception cref="CoreAI.Runtime.NotFoundException">Unknown version or role.</exception>
        MemoryToolResult RevertVersion(string roleId, int version);
    }
}
