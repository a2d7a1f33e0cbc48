namespace CoreAI.Launcher
{
    /// <summary>Where a started runtime answers, and the token clients present.</summary>
    public sealed class RuntimeEndpoint
    {
        /// <summary>Creates an endpoint.</summary>
        public RuntimeEndpoint(string host, int connectPort, int modelPort, string token, int processId)
        {
            Host = host;
            ConnectPort = connectPort;
            ModelPort = modelPort;
            Token = token;
            ProcessId = processId;
        }

        /// <summary>Listen address.</summary>
        public string Host { get; private set; }

        /// <summary>Port of the Connect API.</summary>
        public int ConnectPort { get; private set; }

        /// <summary>Port of the hosted model's server.</summary>
        public int ModelPort { get; private set; }

        /// <summary>The token clients present (Authorization: Bearer).</summary>
        public string Token { get; private set; }

        /// <summary>Process id of the runtime.</summary>
        public int ProcessId { get; private set; }

        /// <summary>Base URL of the Connect API, e.g. `http://127.0.0.1:13335`.</summary>
        public string ConnectBaseUrl
        {
            get { return "http://" + Host + ":" + ConnectPort; }
        }

        /// <summary>Base URL of the model's OpenAI-compatible API, e.g. `http://127.0.0.1:13333/v1`.</summary>
        public string ModelBaseUrl
        {
            get { return "http://" + Host + ":" + ModelPort + "/v1"; }
        }

        /// <summary>Never prints the token.</summary>
        public override string ToString()
        {
            return "RuntimeEndpoint(" + ConnectBaseUrl + ", pid " + ProcessId + ")";
        }
    }
}
