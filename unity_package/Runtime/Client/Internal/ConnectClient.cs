using System;
using System.Globalization;
using System.IO;
using System.Net;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Runtime
{
    /// <summary>
    /// A Connect-protocol client over HttpWebRequest (HTTP/1.1, proto3 JSON): unary calls and server streams,
    /// bearer token, per-call timeouts, cancellation, and errors as <see cref="CoreAIRuntimeException"/>s.
    /// </summary>
    /// <remarks>
    /// HttpWebRequest lives in System.dll, which both of Unity's API compatibility levels reference; HttpClient
    /// (System.Net.Http) is missing from the ".NET Framework" level. Thread-safe; create one per runtime and reuse
    /// it. A cancelled CancellationToken ends a call with OperationCanceledException; a timeout with
    /// DeadlineExceededException; an unreachable runtime with UnavailableException. Dispose (and the end of the
    /// GameHost's Lifetime) cancels every call in flight: nothing of it outlives the game that made it.
    /// </remarks>
    internal sealed class ConnectClient : IRuntimeTransport
    {
        private const string UnaryContentType = "application/json";
        private const string StreamContentType = "application/connect+json";
        private static readonly Encoding Utf8 = new UTF8Encoding(false);

        private readonly string _baseUrl;
        private readonly TimeSpan _defaultTimeout;
        private readonly string _token;
        private readonly Func<string> _tokenSource;
        private readonly System.Security.Cryptography.X509Certificates.X509Certificate2 _trusted;
        private readonly CancellationTokenSource _lifetime = new CancellationTokenSource();
        private readonly CancellationTokenRegistration _hostLifetime;
        private int _disposed;

        /// <summary>A client of the runtime described by options.</summary>
        public ConnectClient(ConnectClientOptions options)
        {
            if (options == null)
            {
                throw new ArgumentNullException("options");
            }
            Uri baseUri;
            if (!Uri.TryCreate(options.BaseUrl, UriKind.Absolute, out baseUri) || (baseUri.Scheme != "http" && baseUri.Scheme != "https"))
            {
                throw new ArgumentException("BaseUrl must be an absolute http:// or https:// URL", "options");
            }
            _baseUrl = options.BaseUrl.TrimEnd('/');
            _defaultTimeout = options.DefaultTimeout;
            _token = options.Token;
            _tokenSource = options.TokenSource;
            if (options.TrustedCertificate != null)
            {
                if (baseUri.Scheme != "https") throw new ArgumentException("TrustedCertificate needs an https:// BaseUrl", "options");
                _trusted = options.TrustedCertificate;
            }
            if (options.GameHost != null && options.GameHost.Lifetime.CanBeCanceled)
            {
                // Already cancelled (a client made after the game stopped): every call ends at once.
                _hostLifetime = options.GameHost.Lifetime.Register(CancelLifetime);
            }
        }

        /// <summary>The base URL calls go to.</summary>
        public string BaseUrl => _baseUrl;

        /// <summary>Cancelled by Dispose and by the end of the GameHost's Lifetime; every call ends with it.</summary>
        public CancellationToken Lifetime => _lifetime.Token;

        /// <summary>One unary call: POST {base}/{service}/{method} with the request as JSON.</summary>
        public async Task<TResponse> UnaryAsync<TRequest, TResponse>(
            string service, string method, TRequest request, CallOptions options, CancellationToken cancellationToken)
            where TResponse : new()
        {
            TimeSpan timeout = ResolveTimeout(options);
            byte[] body = Utf8.GetBytes(ProtoJson.Serialize(request));
            using (CancellationTokenSource deadline = NewDeadline(cancellationToken, _lifetime.Token, timeout))
            {
                string token = CurrentToken();
                // A call that names no conversation inside a turn's stream (a game tool's result) goes with the turn's.
                string affinity = ConversationAffinity.Of(request) ?? ConversationAffinity.CurrentStreamId;
                HttpWebRequest message = NewRequest(service, method, body.Length, UnaryContentType, timeout, token, affinity);
                int status;
                string text;
                // Aborting the request is what interrupts a pending connect, write or read.
                using (deadline.Token.Register(message.Abort))
                {
                    try
                    {
                        await WriteBodyAsync(message, body).ConfigureAwait(false);
                        using (HttpWebResponse response = await GetResponseAsync(message).ConfigureAwait(false))
                        {
                            status = (int)response.StatusCode;
                            text = await ReadAllAsync(response).ConfigureAwait(false);
                        }
                    }
                    catch (Exception ex)
                    {
                        throw Translate(ex, service, method, cancellationToken, deadline, timeout);
                    }
                }
                if (status != 200)
                {
                    throw Refused(ConnectErrors.FromUnaryResponse(status, text), token);
                }
                try
                {
                    return ProtoJson.Deserialize<TResponse>(text);
                }
                catch (Newtonsoft.Json.JsonException ex)
                {
                    throw new InternalException("unreadable " + method + " response: " + ex.Message, ex);
                }
            }
        }

        /// <summary>One server-streaming call; onMessage runs for every message, in order, on a pool thread.</summary>
        /// <remarks>An exception thrown by onMessage ends the call and propagates unchanged.</remarks>
        public async Task ServerStreamAsync<TRequest, TResponse>(
            string service, string method, TRequest request, Action<TResponse> onMessage, CallOptions options, CancellationToken cancellationToken)
            where TResponse : new()
        {
            if (onMessage == null)
            {
                throw new ArgumentNullException("onMessage");
            }
            TimeSpan timeout = ResolveTimeout(options);
            byte[] body = ConnectEnvelope.Encode(0, ProtoJson.Serialize(request));
            using (CancellationTokenSource deadline = NewDeadline(cancellationToken, _lifetime.Token, timeout))
            {
                string token = CurrentToken();
                string affinity = ConversationAffinity.Of(request);
                ConversationAffinity.CurrentStreamId = affinity;  // for the calls onMessage makes (this call's flow only)
                HttpWebRequest message = NewRequest(service, method, body.Length, StreamContentType, timeout, token, affinity);
                using (deadline.Token.Register(message.Abort))
                {
                    HttpWebResponse response;
                    try
                    {
                        await WriteBodyAsync(message, body).ConfigureAwait(false);
                        response = await GetResponseAsync(message).ConfigureAwait(false);
                    }
                    catch (Exception ex)
                    {
                        throw Translate(ex, service, method, cancellationToken, deadline, timeout);
                    }
                    using (response)
                    {
                        if ((int)response.StatusCode != 200)
                        {
                            string text;
                            try
                            {
                                text = await ReadAllAsync(response).ConfigureAwait(false);
                            }
                            catch (Exception ex)
                            {
                                throw Translate(ex, service, method, cancellationToken, deadline, timeout);
                            }
                            throw Refused(ConnectErrors.FromUnaryResponse((int)response.StatusCode, text), token);
                        }
                        Stream stream;
                        try
                        {
                            stream = response.GetResponseStream();
                        }
                        catch (Exception ex)
                        {
                            throw Translate(ex, service, method, cancellationToken, deadline, timeout);
                        }
                        using (stream)
                        // Closing the response too: on some stacks Abort alone does not wake a blocked read.
                        using (deadline.Token.Register(response.Close))
                        {
                            while (true)
                            {
                                ConnectEnvelope envelope;
                                try
                                {
                                    envelope = await ConnectEnvelope.ReadAsync(stream, deadline.Token).ConfigureAwait(false);
                                }
                                catch (CoreAIRuntimeException)
                                {
                                    throw;
                                }
                                catch (Exception ex)
                                {
                                    throw Translate(ex, service, method, cancellationToken, deadline, timeout);
                                }
                                if (envelope == null)
                                {
                                    throw new InternalException(method + " stream ended without an end-of-stream message");
                                }
                                if (envelope.IsCompressed)
                                {
                                    throw new InternalException(method + " stream sent a compressed message this client did not ask for");
                                }
                                if (envelope.IsEndStream)
                                {
                                    CoreAIRuntimeException error = ConnectErrors.FromEndOfStream(envelope.Text);
                                    if (error != null)
                                    {
                                        throw error;
                                    }
                                    return;
                                }
                                TResponse item;
                                try
                                {
                                    item = ProtoJson.Deserialize<TResponse>(envelope.Text);
                                }
                                catch (Newtonsoft.Json.JsonException ex)
                                {
                                    throw new InternalException("unreadable " + method + " stream message: " + ex.Message, ex);
                                }
                                onMessage(item);
                            }
                        }
                    }
                }
            }
        }

        /// <summary>Cancels every call in flight (they end with OperationCanceledException); later calls throw ObjectDisposedException.</summary>
        public void Dispose()
        {
            // Connections are pooled per endpoint by the ServicePoint; what is per client is its calls.
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            _hostLifetime.Dispose();
            CancelLifetime();
        }

        private void CancelLifetime()
        {
            try
            {
                _lifetime.Cancel();
            }
            catch (AggregateException)
            {
                // A registered abort threw; the calls end anyway.
            }
        }

        private TimeSpan ResolveTimeout(CallOptions options)
        {
            TimeSpan timeout = options != null && options.Timeout.HasValue ? options.Timeout.Value : _defaultTimeout;
            if (timeout != System.Threading.Timeout.InfiniteTimeSpan && timeout <= TimeSpan.Zero)
            {
                throw new ArgumentOutOfRangeException("options", "a call timeout must be positive (or Timeout.InfiniteTimeSpan)");
            }
            return timeout;
        }

        private static CancellationTokenSource NewDeadline(CancellationToken cancellationToken, CancellationToken lifetime, TimeSpan timeout)
        {
            CancellationTokenSource deadline = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, lifetime);
            if (timeout != System.Threading.Timeout.InfiniteTimeSpan)
            {
                deadline.CancelAfter(timeout);
            }
            return deadline;
        }

        private string CurrentToken()
        {
            return _tokenSource != null ? _tokenSource() : _token;
        }

        /// <summary>An Unauthenticated answer to an old token after the token changed means the runtime restarted.</summary>
        private CoreAIRuntimeException Refused(CoreAIRuntimeException error, string usedToken)
        {
            if (error is UnauthenticatedException && _tokenSource != null)
            {
                string now = _tokenSource();
                if (!string.IsNullOrEmpty(now) && now != usedToken)
                {
                    return new RuntimeRestartedException(
                        "the CoreAI runtime restarted (it has a new token); the call did not run and can be retried", error);
                }
            }
            return error;
        }

        private HttpWebRequest NewRequest(string service, string method, int length, string contentType, TimeSpan timeout, string token,
            string affinity)
        {
            if (Volatile.Read(ref _disposed) != 0)
            {
                throw new ObjectDisposedException("ConnectClient");
            }
            var message = (HttpWebRequest)WebRequest.Create(_baseUrl + "/" + service + "/" + method);
            message.Method = "POST";
            HttpRequests.Tune(message);  // per request: an idle ServicePoint is replaced by an untuned one
            message.AllowAutoRedirect = false;
            message.KeepAlive = true;
            TlsTrust.Apply(message, _trusted);
            // The deadline (Abort) bounds the call; the request's own timers would cut a long stream.
            message.Timeout = System.Threading.Timeout.Infinite;
            message.ReadWriteTimeout = System.Threading.Timeout.Infinite;
            message.AllowWriteStreamBuffering = false;
            message.AllowReadStreamBuffering = false;
            message.ContentType = contentType;
            message.ContentLength = length;
            message.Headers["Connect-Protocol-Version"] = "1";
            if (timeout != System.Threading.Timeout.InfiniteTimeSpan)
            {
                // Tell the runtime the deadline too, so it stops work nobody waits for.
                long ms = Math.Max(1L, (long)Math.Ceiling(timeout.TotalMilliseconds));
                message.Headers["Connect-Timeout-Ms"] = Math.Min(ms, 9999999999L).ToString(CultureInfo.InvariantCulture);
            }
            if (!string.IsNullOrEmpty(token))
            {
                message.Headers[HttpRequestHeader.Authorization] = "Bearer " + token;
            }
            if (affinity != null)
            {
                message.Headers[ConversationAffinity.Header] = affinity;  // a balancer keeps the conversation on one runtime
            }
            return message;
        }

        private static async Task WriteBodyAsync(HttpWebRequest message, byte[] body)
        {
            using (Stream request = await message.GetRequestStreamAsync().ConfigureAwait(false))
            {
                await request.WriteAsync(body, 0, body.Length).ConfigureAwait(false);
            }
        }

        /// <summary>The response whatever its status (HttpWebRequest throws for non-2xx; the body still matters here).</summary>
        private static async Task<HttpWebResponse> GetResponseAsync(HttpWebRequest message)
        {
            try
            {
                return (HttpWebResponse)await message.GetResponseAsync().ConfigureAwait(false);
            }
            catch (WebException ex) when (ex.Status == WebExceptionStatus.ProtocolError && ex.Response is HttpWebResponse)
            {
                return (HttpWebResponse)ex.Response;
            }
        }

        private static async Task<string> ReadAllAsync(HttpWebResponse response)
        {
            using (Stream stream = response.GetResponseStream())
            using (var reader = new StreamReader(stream, Utf8))
            {
                return await reader.ReadToEndAsync().ConfigureAwait(false);
            }
        }

        private Exception Translate(Exception ex, string service, string method, CancellationToken caller, CancellationTokenSource deadline, TimeSpan timeout)
        {
            if (caller.IsCancellationRequested)
            {
                return new OperationCanceledException(method + " was cancelled", ex, caller);
            }
            if (_lifetime.IsCancellationRequested)
            {
                return new OperationCanceledException(
                    method + " was cancelled: its client was disposed or its game stopped (Play Mode ended, the application quit)", ex, _lifetime.Token);
            }
            if (deadline.IsCancellationRequested)
            {
                return new DeadlineExceededException(
                    method + " timed out after " + ((long)timeout.TotalMilliseconds).ToString(CultureInfo.InvariantCulture) + " ms", ex);
            }
            if (ex is WebException || ex is IOException || ex is ObjectDisposedException
                || ex is System.Net.Sockets.SocketException)
            {
                return new UnavailableException(
                    "the CoreAI runtime at " + _baseUrl + " cannot be reached (" + service + "/" + method + "): " + Innermost(ex).Message, ex);
            }
            if (ex is OperationCanceledException)
            {
                return new DeadlineExceededException(method + " timed out", ex);
            }
            return new InternalException(method + " failed: " + ex.Message, ex);
        }

        private static Exception Innermost(Exception ex)
        {
            while (ex.InnerException != null)
            {
                ex = ex.InnerException;
            }
            return ex;
        }
    }
}
