using System;
using System.Security.Cryptography.X509Certificates;
using System.Threading;
using CoreAI.Runtime;

namespace CoreAI.Launcher
{
    /// <summary>A runtime this game connects to instead of starting one (remote mode): URL, token, trust, patience.</summary>
    public sealed class RemoteRuntimeOptions
    {
        /// <summary>The runtime's Connect base URL: https://HOST:PORT (http:// only for a runtime on this machine).</summary>
        public string Url { get; set; }

        /// <summary>The token the runtime was started with ($COREAI_RUNTIME_TOKEN on the server).</summary>
        public string Token { get; set; }

        /// <summary>The private CA (or self-signed) certificate to trust for https://, as PEM text; empty: the platform's roots.</summary>
        public string TrustedCertificatePem { get; set; }

        /// <summary>How long to wait for the runtime to answer.</summary>
        public TimeSpan ConnectTimeout { get; set; } = TimeSpan.FromSeconds(30);

        /// <summary>Timeout of each probe request.</summary>
        public TimeSpan RequestTimeout { get; set; } = TimeSpan.FromSeconds(5);
    }
}
