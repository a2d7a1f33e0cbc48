using System;
using System.Collections.Concurrent;
using System.Globalization;
using System.Reflection;
using System.Text;
using System.Threading;
using CoreAI.V1;

namespace CoreAI.Runtime
{
    /// <summary>
    /// The id of the conversation a call is about, sent as the <c>coreai-affinity</c> header so that a load balancer in
    /// front of several runtimes keeps each conversation on one runtime (docs/operations/scale-out.md).
    /// </summary>
    /// <remarks>
    /// The id is the lowercase hex SHA-256 of the conversation's storage key (contract §4), the same the Python client
    /// sends: no role, scope or actor in clear. A request names its conversation in its <c>Target</c>; a call that names
    /// none (a game tool's result) inside a turn's stream goes with the turn's id, so it reaches the runtime running
    /// that turn. Calls about no one conversation (Health, roles) carry none.
    /// </remarks>
    internal static class ConversationAffinity
    {
        /// <summary>The header's name (lowercase: gRPC metadata keys are).</summary>
        public const string Header = "coreai-affinity";

        private const string DefaultTurnRole = "Creator";
        private const string AnonymousActor = "local";
        private static readonly ConcurrentDictionary<Type, PropertyInfo> Targets = new ConcurrentDictionary<Type, PropertyInfo>();
        private static readonly AsyncLocal<string> CurrentStream = new AsyncLocal<string>();

        /// <summary>The id of the stream the calling code runs inside (its callbacks and the tasks they start); null: none.</summary>
        public static string CurrentStreamId
        {
            get { return CurrentStream.Value; }
            set { CurrentStream.Value = value; }
        }

        /// <summary>The id of the request's conversation; null when it names none (or no valid role: any runtime refuses it).</summary>
        public static string Of(object request)
        {
            if (request == null) return null;
            PropertyInfo property = Targets.GetOrAdd(request.GetType(), t => t.GetProperty("Target", typeof(AgentTarget)));
            AgentTarget target = property == null ? null : property.GetValue(request, null) as AgentTarget;
            if (target == null) return null;
            string role = Trim(target.RoleId);
            if (role.Length == 0 && (request is RunTaskRequest || request is WaitMemoryWritesRequest))
            {
                role = DefaultTurnRole;  // a turn with no role runs as Creator
            }
            return role.Length == 0 ? null : Digest.Sha256Hex(StorageKey(role, target.Scope, Trim(target.Actor)));
        }

        /// <summary>The storage key of (role, scope, actor): bare role, scope-v1-… or actor-v1-… (contract §4).</summary>
        public static string StorageKey(string role, AgentMemoryScopeProto scope, string actor)
        {
            string[] parts = scope == null
                ? new[] { "", "", "", "" }
                : new[] { Trim(scope.TenantId), Trim(scope.UserId), Trim(scope.SessionId), Trim(scope.TopicId) };
            bool emptyScope = parts[0].Length == 0 && parts[1].Length == 0 && parts[2].Length == 0 && parts[3].Length == 0;
            var canonical = new StringBuilder();
            if (actor.Length > 0 && actor != AnonymousActor)
            {
                Append(canonical, actor);
                if (!emptyScope) foreach (string part in parts) Append(canonical, part);
                Append(canonical, role);
                return "actor-v1-" + Digest.Sha256Hex(canonical.ToString());
            }
            if (emptyScope) return role;
            foreach (string part in parts) Append(canonical, part);
            Append(canonical, role);
            return "scope-v1-" + Digest.Sha256Hex(canonical.ToString());
        }

        private static void Append(StringBuilder canonical, string value)
        {
            // Length in UTF-16 code units, as the key derivation counts them.
            canonical.Append(value.Length.ToString(CultureInfo.InvariantCulture)).Append(':').Append(value).Append(';');
        }

        private static string Trim(string value)
        {
            return (value ?? "").Trim();
        }
    }
}
