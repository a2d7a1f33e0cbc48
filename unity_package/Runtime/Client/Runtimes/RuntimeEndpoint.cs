namespace CoreAI.Launcher
{
    /// <summary>Where a started runtime answers, and the token clients present.</summary>
    public sealed class RuntimeEndpoint
    {
        /// <summary>Default port of the Connect (HTTP/1.1 + JSON) API, which also answers GET /healthz.</summary>
        public const int DefaultConnectPort = 13335;

        /// <summary>Default port of the gRPC API.</summary>
        public const int DefaultGrpcPort = 13334;

        /// <summary>Default port of the hosted model's OpenAI-compatible server.</summary>
        public const int DefaultModelPort = 13333;

        /// <summary>Creates an endpoint.</summary>
        public RuntimeEndpoint(string host, int connectPort, int modelPort, string token, int processId)
            : this(host, connectPort, 0, modelPort, token, processId)
        {
        }

        /// <summary>Creates an endpoint with its gRPC port.</summary>
        public RuntimeEndpoint(string host, int connectPort, int grpcPort, int modelPort, string token, int processId)
        {
            Host = host;
            ConnectPort = connectPort;
            GrpcPort = grpcPort;
            ModelPort = modelPort;
            Token = token;
            ProcessId = processId;
        }

        /// <summary>A runtime this game did not start (remote mode): its Connect base URL (http or https) and token.</summary>
        public RuntimeEndpoint(System.Uri connectBaseUrl, string token)
        {
            if (connectBaseUrl == null) throw new System.ArgumentNullException(nameof(connectBaseUrl));
            Host = connectBaseUrl.Host;
            ConnectPort = connectBaseUrl.Port;
            Token = token;
            remoteBaseUrl = connectBaseUrl.GetLeftPart(System.UriPartial.Authority);
        }

        private readonly string remoteBaseUrl;

        /// <summary>True for a runtime reached by URL (remote mode): no process here, no model port to reach.</summary>
        public bool IsRemote
        {
            get { return remoteBaseUrl != null; }
        }

        /// <summary>Listen address.</summary>
        public string Host { get; private set; }

        /// <summary>Port of the Connect API.</summary>
        public int ConnectPort { get; private set; }

        /// <summary>Port of the gRPC API (0 when unknown: a remote runtime).</summary>
        public int GrpcPort { get; private set; }

        /// <summary>Port of the hosted model's server.</summary>
        public int ModelPort { get; private set; }

        /// <summary>The token clients present (Authorization: Bearer).</summary>
        public string Token { get; private set; }

        /// <summary>Process id of the runtime.</summary>
        public int ProcessId { get; private set; }

        /// <summary>Base URL of the Connect API, e.g. `http://127.0.0.1:13335`.</summary>
        public string ConnectBaseUrl
        {
            get { return remoteBaseUrl ?? "http://" + Host + ":" + ConnectPort; }
        }

        /// <summary>Base URL of the model's OpenAI-compatible API, e.g. `http://127.0.0.1:13333/v1`; null for a remote runtime (its model port stays on its own loopback).</summary>
        public string ModelBaseUrl
        {
            get { return IsRemote ? null : "http://" + Host + ":" + ModelPort + "/v1"; }
        }

        /// <summary>Never prints the token.</summary>
        public override string ToString()
        {
            return "RuntimeEndpoint(" + ConnectBaseUrl + ", pid " + ProcessId + ")";
        }
    }
}
