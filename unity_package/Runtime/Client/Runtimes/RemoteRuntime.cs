using System;
using System.Security.Cryptography.X509Certificates;
using System.Threading;
using CoreAI.Runtime;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Remote mode: checks that a runtime answers at a URL and accepts the token, then hands out clients of it.
    /// Nothing is started or stopped here; the server's operator runs `coreai-runtime serve --listen … --tls-cert …`.
    /// </summary>
    public sealed class RemoteRuntime
    {
        private static readonly TimeSpan PollInterval = TimeSpan.FromMilliseconds(250);

        private readonly RemoteRuntimeOptions options;
        private readonly Uri baseUri;
        private readonly X509Certificate2 trusted;

        /// <summary>Remote mode with `options`, validated here (RuntimeLaunchException RemoteUnreachable naming the problem).</summary>
        public RemoteRuntime(RemoteRuntimeOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            this.options = options;
            string url = (options.Url ?? "").Trim();
            if (!Uri.TryCreate(url, UriKind.Absolute, out baseUri) || (baseUri.Scheme != "https" && baseUri.Scheme != "http"))
                throw new RuntimeLaunchException(RuntimeLaunchFailure.RemoteUnreachable,
                    "the remote runtime URL must be https://HOST:PORT (the runtime's Connect port)");
            if (baseUri.Scheme == "http" && !baseUri.IsLoopback)
                throw new RuntimeLaunchException(RuntimeLaunchFailure.RemoteUnreachable,
                    "the remote runtime URL must use https:// for a host other than this machine: http:// would send the token in clear text");
            if (string.IsNullOrEmpty(options.Token))
                throw new RuntimeLaunchException(RuntimeLaunchFailure.TokenRefused,
                    "remote mode needs the runtime's token (CoreAIRuntimeSettings > Remote runtime > Token)");
            if (!string.IsNullOrWhiteSpace(options.TrustedCertificatePem))
            {
                if (baseUri.Scheme != "https")
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.RemoteUnreachable, "a trusted certificate needs an https:// remote runtime URL");
                try
                {
                    trusted = TlsTrust.FromPem(options.TrustedCertificatePem);
                }
                catch (ArgumentException e)
                {
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.RemoteUnreachable, "remote runtime: " + e.Message, null, e);
                }
            }
        }

        /// <summary>The runtime's Connect base URL (scheme, host and port).</summary>
        public string BaseUrl
        {
            get { return baseUri.GetLeftPart(UriPartial.Authority); }
        }

        /// <summary>
        /// Blocks until the runtime answers (its model may still load: turns then answer UNAVAILABLE with a retry hint) and
        /// accepts the token. Throws RuntimeLaunchException: RemoteUnreachable after ConnectTimeout, TokenRefused at once.
        /// </summary>
        public RuntimeEndpoint Connect(CancellationToken cancel = default(CancellationToken))
        {
            DateTime deadline = DateTime.UtcNow + options.ConnectTimeout;
            while (true)
            {
                if (HealthProbe.IsLive(BaseUrl, options.RequestTimeout, cancel, trusted))
                {
                    int status = HealthProbe.TokenStatus(BaseUrl, options.Token, options.RequestTimeout, cancel, trusted);
                    if (status >= 200 && status <= 299) return new RuntimeEndpoint(baseUri, options.Token);
                    if (status == 401 || status == 403)
                        throw new RuntimeLaunchException(RuntimeLaunchFailure.TokenRefused,
                            "the remote CoreAI runtime at " + BaseUrl + " refused the token (HTTP " + status + "); use the token it was started with");
                }
                if (DateTime.UtcNow > deadline)
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.RemoteUnreachable,
                        "the remote CoreAI runtime at " + BaseUrl + " did not answer within " + options.ConnectTimeout.TotalSeconds
                        + " s (is it running with --listen, and does the certificate match the host and the trusted certificate?)");
                if (cancel.WaitHandle.WaitOne(PollInterval))
                    throw new RuntimeLaunchException(RuntimeLaunchFailure.Stopped, "stopped while connecting to the remote runtime");
            }
        }

        /// <summary>A client of the remote runtime (the caller disposes it); policy null uses AgentMemoryPolicy.Default.</summary>
        public CoreAIRuntimeClient CreateClient(CoreAI.Ai.AgentMemoryPolicy policy = null)
        {
            return CreateClient(policy, null);
        }

        /// <summary>CreateClient for a game: `host` (the Unity layer's) gives it the main thread and the play session's lifetime.</summary>
        public CoreAIRuntimeClient CreateClient(CoreAI.Ai.AgentMemoryPolicy policy, GameHost host)
        {
            var clientOptions = new ConnectClientOptions { BaseUrl = BaseUrl, Token = options.Token, TrustedCertificate = trusted, GameHost = host };
            return new CoreAIRuntimeClient(clientOptions, policy);
        }
    }
}
