using System;
using System.Threading;

namespace CoreAI.Runtime
{
    /// <summary>Where the runtime listens and how to call it.</summary>
    public sealed class ConnectClientOptions
    {
        /// <summary>The runtime's default RPC address.</summary>
        public const string DefaultBaseUrl = "http://127.0.0.1:13335";

        /// <summary>Base URL of the runtime's Connect endpoint, e.g. http://127.0.0.1:13335.</summary>
        public string BaseUrl { get; set; } = DefaultBaseUrl;

        /// <summary>Bearer token the runtime was started with (null: send none).</summary>
        public string Token { get; set; }

        /// <summary>
        /// Where the current token comes from, read for every call (wins over Token): a runtime restarted with a new
        /// token is then used without a new client. The Unity layer passes its launcher's current endpoint.
        /// </summary>
        public Func<string> TokenSource { get; set; }

        /// <summary>Timeout of a call without its own (Timeout.InfiniteTimeSpan: none).</summary>
        public TimeSpan DefaultTimeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>
        /// For an https:// runtime whose certificate a private CA issued (or that is self-signed): that CA certificate,
        /// the only one trusted (see <see cref="TlsTrust"/>). Null: the platform's roots decide.
        /// </summary>
        public System.Security.Cryptography.X509Certificates.X509Certificate2 TrustedCertificate { get; set; }

        /// <summary>The game hosting the client (main thread, lifetime, whether game code may run); null: none (plain .NET).</summary>
        public GameHost GameHost { get; set; }
    }
}
