using System;

namespace CoreAI.Ai
{
    /// <summary>Tenant / user / session / topic that isolate one player's data from another's (contract §4).</summary>
    public sealed class AgentMemoryScope : IEquatable<AgentMemoryScope>
    {
        /// <summary>The empty scope: the storage key is the bare role id.</summary>
        public static readonly AgentMemoryScope Empty = new AgentMemoryScope();

        /// <summary>A scope; null parts are "".</summary>
        public AgentMemoryScope(string tenantId = "", string userId = "", string sessionId = "", string topicId = "")
        {
            TenantId = tenantId ?? "";
            UserId = userId ?? "";
            SessionId = sessionId ?? "";
            TopicId = topicId ?? "";
        }

        /// <summary>Tenant (a game, a server).</summary>
        public string TenantId { get; }

        /// <summary>The player.</summary>
        public string UserId { get; }

        /// <summary>A play session or save slot.</summary>
        public string SessionId { get; }

        /// <summary>A topic within the session.</summary>
        public string TopicId { get; }

        /// <summary>True when every part is blank.</summary>
        public bool IsEmpty =>
            TenantId.Trim().Length == 0 && UserId.Trim().Length == 0 && SessionId.Trim().Length == 0 && TopicId.Trim().Length == 0;

        /// <summary>A scope for one player.</summary>
        public static AgentMemoryScope ForUser(string userId)
        {
            return new AgentMemoryScope(userId: userId);
        }

        /// <summary>Equal when all four parts are equal.</summary>
        public bool Equals(AgentMemoryScope other)
        {
            return other != null && TenantId == other.TenantId && UserId == other.UserId && SessionId == other.SessionId && TopicId == other.TopicId;
        }

        /// <summary>See <see cref="Equals(AgentMemoryScope)"/>.</summary>
        public override bool Equals(object obj)
        {
            return Equals(obj as AgentMemoryScope);
        }

        /// <summary>Hash of the four parts.</summary>
        public override int GetHashCode()
        {
            return (TenantId + "\u0001" + UserId + "\u0001" + SessionId + "\u0001" + TopicId).GetHashCode();
        }

        /// <summary>Counts only: scope parts may be personal data and never reach logs.</summary>
        public override string ToString()
        {
            return IsEmpty ? "AgentMemoryScope(empty)" : "AgentMemoryScope(scoped)";
        }
    }
}
