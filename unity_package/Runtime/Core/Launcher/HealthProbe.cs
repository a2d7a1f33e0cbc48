using System;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

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

    /// <summary>Health and token checks against the runtime's Connect port.</summary>
    internal static class HealthProbe
    {
        private const string HealthPath = "/healthz";
        private const string AuthenticatedProbePath = "/coreai.v1.Orchestrator/ListRoles";

        // One client for the process: loopback calls never go through a proxy.
        private static readonly HttpClient Http = new HttpClient(new HttpClientHandler { UseProxy = false });

        /// <summary>The health answer, or null when nothing healthy answers.</summary>
        public static RuntimeHealth Check(string baseUrl, TimeSpan timeout, CancellationToken cancel)
        {
            try
            {
                using (CancellationTokenSource cts = CancellationTokenSource.CreateLinkedTokenSource(cancel))
                {
                    cts.CancelAfter(timeout);
                    using (HttpResponseMessage response = Http.GetAsync(baseUrl + HealthPath, cts.Token).GetAwaiter().GetResult())
                    {
                        if (!response.IsSuccessStatusCode) return null;
                        string body = response.Content.ReadAsStringAsync().GetAwaiter().GetResult();
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
                }
            }
            catch (Exception e) when (IsTransient(e, cancel))
            {
                return null;
            }
        }

        /// <summary>True when the runtime at `baseUrl` accepts `token` (an authenticated call succeeds).</summary>
        public static bool AcceptsToken(string baseUrl, string token, TimeSpan timeout, CancellationToken cancel)
        {
            try
            {
                using (CancellationTokenSource cts = CancellationTokenSource.CreateLinkedTokenSource(cancel))
                using (HttpRequestMessage request = new HttpRequestMessage(HttpMethod.Post, baseUrl + AuthenticatedProbePath))
                {
                    cts.CancelAfter(timeout);
                    request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", token);
                    request.Content = new StringContent("{}", Encoding.UTF8, "application/json");
                    using (HttpResponseMessage response = Http.SendAsync(request, cts.Token).GetAwaiter().GetResult())
                    {
                        return response.IsSuccessStatusCode;
                    }
                }
            }
            catch (Exception e) when (IsTransient(e, cancel))
            {
                return false;
            }
        }

        private static bool IsTransient(Exception e, CancellationToken cancel)
        {
            if (cancel.IsCancellationRequested) return false;
            return e is HttpRequestException || e is OperationCanceledException || e is Newtonsoft.Json.JsonException
                || e is System.IO.IOException || e is System.Net.WebException || e is InvalidCastException
                || e is FormatException;
        }
    }
}
