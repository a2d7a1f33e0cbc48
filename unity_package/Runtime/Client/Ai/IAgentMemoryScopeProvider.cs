using System;

namespace CoreAI.Ai
{
    /// <summary>Supplies the scope of the current request (a host serving several players).</summary>
    public interface IAgentMemoryScopeProvider
    {
        /// <summary>The scope for a role; <see cref="AgentMemoryScope.Empty"/> keeps role-only keys.</summary>
        AgentMemoryScope GetScope(string roleId);
    }
}
