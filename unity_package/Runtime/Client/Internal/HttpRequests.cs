using System;
using System.Net;

namespace CoreAI.Runtime
{
    /// <summary>
    /// Settings every HttpWebRequest to a runtime gets, per request: the ServicePoint that carries them is replaced by a
    /// default one (2 connections) after it idles, so settings made once are lost; and the proxy rule.
    /// </summary>
    internal static class HttpRequests
    {
        /// <summary>Connections per runtime: a running stream plus the calls beside it (SubmitToolResult, saves, more turns).</summary>
        public const int ConnectionLimit = 16;

        /// <summary>
        /// How long a kept-alive connection (and its ServicePoint) may idle: below the runtime's keep-alive (60 s), so a
        /// connection the runtime is closing is never reused.
        /// </summary>
        public static readonly TimeSpan ConnectionIdleTime = TimeSpan.FromSeconds(30);

        /// <summary>Proxy and ServicePoint settings for `request` (before its body is written).</summary>
        public static void Tune(HttpWebRequest request)
        {
            // Loopback never goes through a proxy; a remote runtime goes through the system's (a corporate network's).
            if (request.RequestUri.IsLoopback) request.Proxy = null;
            try
            {
                ServicePoint point = request.ServicePoint;
                // Small JSON calls: Nagle and 100-continue only add latency, and two connections (the default) would
                // make a running stream block every other call.
                point.UseNagleAlgorithm = false;
                point.Expect100Continue = false;
                if (point.ConnectionLimit < ConnectionLimit) point.ConnectionLimit = ConnectionLimit;
                int idle = (int)ConnectionIdleTime.TotalMilliseconds;
                if (point.MaxIdleTime != idle) point.MaxIdleTime = idle;
            }
            catch (NotSupportedException)
            {
                // Platforms without ServicePoints keep their defaults.
            }
        }
    }
}
