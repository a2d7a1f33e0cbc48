using System;
using System.Collections.Generic;

namespace CoreAI.Ai
{
    /// <summary>Versions of any <see cref="IAgentMemoryStore"/>: the runtime's when the store has them, else from the loaded state.</summary>
    public static class AgentMemoryStoreExtensions
    {
        /// <summary>Retained versions of a role, oldest first.</summary>
        public static IReadOnlyList<AgentMemoryVersion> ListVersions(this IAgentMemoryStore store, string roleId)
        {
            if (store == null)
            {
                throw new ArgumentNullException("store");
            }
            var versioned = store as IAgentMemoryVersionStore;
            if (versioned != null)
            {
                return versioned.ListVersions(roleId);
            }
            AgentMemoryState state;
            return store.TryLoad(roleId, out state) && state.Versions != null
                ? (IReadOnlyList<AgentMemoryVersion>)state.Versions.ToArray()
                : new AgentMemoryVersion[0];
        }

        /// <summary>The design note's form: set the memory to a retained version; false when the role or version is unknown.</summary>
        public static bool Revert(this IAgentMemoryStore store, string roleId, int version)
        {
            string error;
            return Revert(store, roleId, version, out error);
        }

        /// <summary>The design note's form with the reason: false and error when the role or version is unknown or the edit was refused.</summary>
        /// <exception cref="CoreAI.Runtime.CoreAIRuntimeException">The runtime cannot be reached (a transport failure is not a refusal).</exception>
        public static bool Revert(this IAgentMemoryStore store, string roleId, int version, out string error)
        {
            MemoryToolResult result;
            try
            {
                result = RevertVersion(store, roleId, version);
            }
            catch (CoreAI.Runtime.NotFoundException e)
            {
                error = e.Message;
                return false;
            }
            catch (CoreAI.Runtime.FailedPreconditionException e)
            {
                error = e.Message;
                return false;
            }
            catch (CoreAI.Runtime.InvalidArgumentException e)
            {
                error = e.Message;
                return false;
            }
            error = result.Success ? null : result.Message;
            return result.Success;
        }

        /// <summary>Set the memory to a retained version; the revert is itself a new version.</summary>
        /// <exception cref="CoreAI.Runtime.NotFoundException">Unknown version or role.</exception>
        public static MemoryToolResult RevertVersion(this IAgentMemoryStore store, string roleId, int version)
        {
            if (store == null)
            {
                throw new ArgumentNullException("store");
            }
            var versioned = store as IAgentMemoryVersionStore;
            if (versioned != null)
            {
                return versioned.RevertVersion(roleId, version);
            }
            AgentMemoryState state;
            if (!store.TryLoad(roleId, out state))
            {
                throw new CoreAI.Runtime.NotFoundException("the role has no memory document to revert");
            }
            AgentMemoryVersion target = state.Versions.Find(v => v.Version == version);
            if (target == null)
            {
                throw new CoreAI.Runtime.NotFoundException("version " + version + " is not retained");
            }
            int before = state.Memory.Length;
            int next = 1;
            foreach (AgentMemoryVersion v in state.Versions)
            {
                next = Math.Max(next, v.Version + 1);
            }
            state.Memory = target.ContentAfter;
            int delta = state.Memory.Length - before;
            state.Versions.Add(new AgentMemoryVersion
            {
                Version = next,
                Timestamp = DateTimeOffset.UtcNow.ToUnixTimeSeconds(),
                Action = "revert",
                ContentAfter = state.Memory,
                Note = "Reverted to version " + version + ".",
            });
            int keep = state.MaxMemoryVersions < 1 ? AgentMemoryState.DefaultMaxMemoryVersions : state.MaxMemoryVersions;
            if (state.Versions.Count > keep)
            {
                state.Versions.RemoveRange(0, state.Versions.Count - keep);
            }
            store.Save(roleId, state);
            return new MemoryToolResult
            {
                Success = true,
                Message = "DONE: reverted to version " + version + " (" + (delta >= 0 ? "+" : "") + delta + " chars)",
                Version = next,
                MemoryLength = state.Memory.Length,
            };
        }
    }
}
