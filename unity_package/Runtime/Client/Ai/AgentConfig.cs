using System;

namespace CoreAI.Ai
{
    /// <summary>A built agent: its role id and memory configuration (a copy).</summary>
    public sealed class AgentConfig
    {
        internal AgentConfig(RoleMemoryConfig memory)
        {
            Memory = memory;
        }

        /// <summary>The role id.</summary>
        public string RoleId => Memory.RoleId;

        /// <summary>How the role uses memory, history and compaction.</summary>
        public RoleMemoryConfig Memory { get; }

        /// <summary>The role's system prompt.</summary>
        public string SystemPrompt => Memory.SystemPrompt;

        /// <summary>Register this configuration in a policy.</summary>
        public void ApplyTo(AgentMemoryPolicy policy)
        {
            if (policy == null)
            {
                throw new ArgumentNullException("policy");
            }
            policy.SetConfig(Memory);
        }
    }
}
