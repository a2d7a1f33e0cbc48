using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Newtonsoft.Json.Converters;
using V1 = CoreAI.V1;

namespace CoreAI.Ai
{
    /// <summary>The game tools of each role (filled by <see cref="AgentBuilder.WithTool{TArgs}(string, string, Func{TArgs, Task{string}}, bool)"/>).</summary>
    public sealed class GameToolRegistry
    {
        private readonly object _lock = new object();
        private readonly Dictionary<string, List<GameTool>> _tools = new Dictionary<string, List<GameTool>>(StringComparer.Ordinal);

        /// <summary>Replace a role's tools.</summary>
        public void Set(string roleId, IEnumerable<GameTool> tools)
        {
            string role = AgentMemoryPolicy.NormalizeRoleId(roleId);
            var list = new List<GameTool>(tools ?? new GameTool[0]);
            var names = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
            foreach (GameTool tool in list)
            {
                if (!names.Add(tool.Name)) throw new ArgumentException("tool '" + tool.Name + "' is given twice for role " + role);
            }
            lock (_lock)
            {
                if (list.Count == 0) _tools.Remove(role);
                else _tools[role] = list;
            }
        }

        /// <summary>A role's tools (empty when it has none).</summary>
        public IReadOnlyList<GameTool> For(string roleId)
        {
            string role = AgentMemoryPolicy.NormalizeRoleId(roleId);
            lock (_lock)
            {
                List<GameTool> tools;
                return _tools.TryGetValue(role, out tools) ? tools.ToArray() : new GameTool[0];
            }
        }
    }
}
