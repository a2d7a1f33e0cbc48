using System;
using System.Security.Cryptography.X509Certificates;

namespace CoreAI.Launcher
{
    /// <summary>What a runtime answered on GET /healthz.</summary>
    public sealed class RuntimeHealth
    {
        /// <summary>The runtime serves calls.</summary>
        public bool Ready { get; internal set; }

        /// <summary>The model answers too.</summary>
        public bool ModelReady { get; internal set; }

        /// <summary>The model alias (never a path).</summary>
        public string Model { get; internal set; }

        /// <summary>The runtime's version.</summary>
        public string Version { get; internal set; }
    }
}
