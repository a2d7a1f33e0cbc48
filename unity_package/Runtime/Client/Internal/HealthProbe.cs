using System;
using System.IO;
using System.Net;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace CoreAI.Launcher
{
    /// <summary>Health and token checks against the runtime's Connect port.</summary>
    internal static class HealthProbe
    {
        private const string HealthPath = "/healthz";
        private const string LivenessPath = "/livez";
        private const string AuthenticatedProbePath = "/coreai.v1.Orchestrator/ListRoles";
        private const string ShutdownPath = "/coreai.v1.Orchestrator/Shutdown";

        /// <summary>The health answer, or null when nothing healthy answers.</summary>
        public static RuntimeHealth Check(string baseUrl, TimeSpan timeout, CancellationToken cancel)
        {
            return Check(baseUrl, timeout, cancel, null);
        }

        /// <summary>The health answer, or null when nothing healthy answers; `trust` is the certificate an https:// server must chain to (null: the platform's roots).</summary>
        public static RuntimeHealth Check(string baseUrl, TimeSpan timeout, CancellationToken cancel, X509Certificate2 trust)
        {
            try
            {
                string body;
                int status = Send(baseUrl + HealthPath, "GET", null, null, timeout, cancel, trust, out body);
                if (status < 200 || status > 299) return null;
                JObject json = JObject.Parse(body);
                RuntimeHealth health = new RuntimeHealth
                {
                    Ready = (bool?)json["ready"] ?? false,
                    ModelReady = (bool?)json["modelReady"] ?? false,
                    Model = (string)json["model"] ?? "",
                    Version = (string)json["version"] ?? "",
                };
                return health.Ready ? health : null;
            }
            catch (Exception e) when (IsTransient(e, cancel))
            {
                return null;
            }
        }

        /// <summary>
        /// True when a runtime process serves at `baseUrl` (GET /livez answers 200), even while its model loads or
        /// restarts (when /healthz answers 503): the test for "is a runtime there to reuse", not "is it ready".
        /// </summary>
        public static bool IsLive(string baseUrl, TimeSpan timeout, CancellationToken cancel)
        {
            return IsLive(baseUrl, timeout, cancel, null);
        }

        /// <summary>IsLive for an https:// server checked with `trust` (null: the platform's roots).</summary>
        public static bool IsLive(string baseUrl, TimeSpan timeout, CancellationToken cancel, X509Certificate2 trust)
        {
            try
            {
                string body;
                int status = Send(baseUrl + LivenessPath, "GET", null, null, timeout, cancel, trust, out body);
                if (status < 200 || status > 299) return false;
                return (bool?)JObject.Parse(body)["live"] ?? false;
            }
            catch (Exception e) when (IsTransient(e, cancel))
            {
                return false;
            }
        }

        /// <summary>True when the runtime at `baseUrl` accepts `token` (an authenticated call succeeds).</summary>
        public static bool AcceptsToken(string baseUrl, string token, TimeSpan timeout, CancellationToken cancel)
        {
            int status = TokenStatus(baseUrl, token, timeout, cancel, null);
            return status >= 200 && status <= 299;
        }

        /// <summary>Asks the runtime at `baseUrl` to stop gracefully (the Shutdown call with `token`); true when it accepted.</summary>
        public static bool RequestShutdown(string baseUrl, string token, TimeSpan timeout)
        {
            try
            {
                string body;
                int status = Send(baseUrl + ShutdownPath, "POST", "{}", "Bearer " + token, timeout, CancellationToken.None, null, out body);
                return status >= 200 && status <= 299;
            }
            catch (Exception e) when (IsTransient(e, CancellationToken.None))
            {
                return false;
            }
        }

        /// <summary>The HTTP status of an authenticated call with `token` (401: refused), or 0 when nothing answers.</summary>
        public static int TokenStatus(string baseUrl, string token, TimeSpan timeout, CancellationToken cancel, X509Certificate2 trust)
        {
            try
            {
                string body;
                return Send(baseUrl + AuthenticatedProbePath, "POST", "{}", "Bearer " + token, timeout, cancel, trust, out body);
            }
            catch (Exception e) when (IsTransient(e, cancel))
            {
                return 0;
            }
        }

        // HttpWebRequest (System.dll) rather than HttpClient: the ".NET Framework" API level has no System.Net.Http.
        private static int Send(string url, string method, string json, string authorization, TimeSpan timeout, CancellationToken cancel,
            X509Certificate2 trust, out string body)
        {
            var request = (HttpWebRequest)WebRequest.Create(url);
            request.Method = method;
            CoreAI.Runtime.HttpRequests.Tune(request);  // loopback without a proxy; a remote runtime through the system's
            request.AllowAutoRedirect = false;
            CoreAI.Runtime.TlsTrust.Apply(request, trust);
            int ms = (int)Math.Max(1, Math.Min(int.MaxValue, timeout.TotalMilliseconds));
            request.Timeout = ms;
            request.ReadWriteTimeout = ms;
            if (authorization != null) request.Headers[HttpRequestHeader.Authorization] = authorization;
            using (cancel.Register(request.Abort))
            {
                if (json != null)
                {
                    byte[] bytes = Encoding.UTF8.GetBytes(json);
                    request.ContentType = "application/json";
                    request.ContentLength = bytes.Length;
                    using (Stream stream = request.GetRequestStream())
                    {
                        stream.Write(bytes, 0, bytes.Length);
                    }
                }
                HttpWebResponse response;
                try
                {
                    response = (HttpWebResponse)request.GetResponse();
                }
                catch (WebException e) when (e.Status == WebExceptionStatus.ProtocolError && e.Response is HttpWebResponse)
                {
                    response = (HttpWebResponse)e.Response;
                }
                using (response)
                using (var reader = new StreamReader(response.GetResponseStream(), Encoding.UTF8))
                {
                    body = reader.ReadToEnd();
                    return (int)response.StatusCode;
                }
            }
        }

        private static bool IsTransient(Exception e, CancellationToken cancel)
        {
            if (cancel.IsCancellationRequested) return false;
            return e is OperationCanceledException || e is Newtonsoft.Json.JsonException
                || e is System.IO.IOException || e is System.Net.WebException || e is InvalidCastException
                || e is FormatException;
        }
    }
}
