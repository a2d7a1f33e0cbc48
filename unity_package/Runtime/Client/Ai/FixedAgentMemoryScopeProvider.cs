using System;

namespace CoreAI.Ai
{
    /// <summary>Always the same scope.</summary>
    public sealed class FixedAgentMemoryScopeProvider : IAgentMemoryScopeProvider
    {
        private readonly AgentMemoryScope _scope;

        /// <summary>A provider of scope (null: the empty scope).</summary>
        public FixedAgentMemoryScopeProvider(AgentMemoryScope scope)
        {
            _scope = scope ?? AgentMemoryScope.Empty;
        }

        /// <summary>The fixed scope.</summary>
        public AgentMemoryScope GetScope(string roleId)
        {
            return _scope;
        }
    }
}
