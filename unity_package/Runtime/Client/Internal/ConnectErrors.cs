using System;
using System.Collections.Generic;
using Newtonsoft.Json.Linq;

namespace CoreAI.Runtime
{
    /// <summary>Maps Connect error codes, HTTP statuses and error bodies to <see cref="CoreAIRuntimeException"/>s.</summary>
    internal static class ConnectErrors
    {
        private static readonly Dictionary<string, ConnectCode> Codes = new Dictionary<string, ConnectCode>(StringComparer.Ordinal)
        {
            { "canceled", ConnectCode.Canceled },
            { "unknown", ConnectCode.Unknown },
            { "invalid_argument", ConnectCode.InvalidArgument },
            { "deadline_exceeded", ConnectCode.DeadlineExceeded },
            { "not_found", ConnectCode.NotFound },
            { "already_exists", ConnectCode.AlreadyExists },
            { "permission_denied", ConnectCode.PermissionDenied },
            { "resource_exhausted", ConnectCode.ResourceExhausted },
            { "failed_precondition", ConnectCode.FailedPrecondition },
            { "aborted", ConnectCode.Aborted },
            { "out_of_range", ConnectCode.OutOfRange },
            { "unimplemented", ConnectCode.Unimplemented },
            { "internal", ConnectCode.Internal },
            { "unavailable", ConnectCode.Unavailable },
            { "data_loss", ConnectCode.DataLoss },
            { "unauthenticated", ConnectCode.Unauthenticated },
        };

        /// <summary>The wire name of a code, e.g. InvalidArgument -> "invalid_argument".</summary>
        public static string WireName(ConnectCode code)
        {
            foreach (KeyValuePair<string, ConnectCode> pair in Codes)
            {
                if (pair.Value == code)
                {
                    return pair.Key;
                }
            }
            return "unknown";
        }

        /// <summary>The code of a wire name; an unknown name is Unknown.</summary>
        public static ConnectCode ParseCode(string name)
        {
            ConnectCode code;
            return name != null && Codes.TryGetValue(name, out code) ? code : ConnectCode.Unknown;
        }

        /// <summary>The code of an HTTP status without a Connect error body (Connect's HTTP-to-code table).</summary>
        public static ConnectCode FromHttpStatus(int status)
        {
            switch (status)
            {
                case 400: return ConnectCode.Internal;
                case 401: return ConnectCode.Unauthenticated;
                case 403: return ConnectCode.PermissionDenied;
                case 404: return ConnectCode.Unimplemented;
                case 408: return ConnectCode.DeadlineExceeded;
                case 429: return ConnectCode.Unavailable;
                case 502: return ConnectCode.Unavailable;
                case 503: return ConnectCode.Unavailable;
                case 504: return ConnectCode.Unavailable;
                default: return ConnectCode.Unknown;
            }
        }

        /// <summary>The exception of a code: a specific subclass where one exists.</summary>
        public static CoreAIRuntimeException Create(ConnectCode code, string message, Exception inner = null)
        {
            message = string.IsNullOrEmpty(message) ? WireName(code) : message;
            switch (code)
            {
                case ConnectCode.InvalidArgument: return new InvalidArgumentException(message, inner);
                case ConnectCode.NotFound: return new NotFoundException(message, inner);
                case ConnectCode.FailedPrecondition: return new FailedPreconditionException(message, inner);
                case ConnectCode.Unauthenticated: return new UnauthenticatedException(message, inner);
                case ConnectCode.PermissionDenied: return new PermissionDeniedException(message, inner);
                case ConnectCode.ResourceExhausted: return new ResourceExhaustedException(message, inner);
                case ConnectCode.Unavailable: return new UnavailableException(message, inner);
                case ConnectCode.DeadlineExceeded: return new DeadlineExceededException(message, inner);
                case ConnectCode.Canceled: return new CanceledException(message, inner);
                case ConnectCode.Internal: return new InternalException(message, inner);
                case ConnectCode.Unimplemented: return new UnimplementedException(message, inner);
                default: return new CoreAIRuntimeException(code, message, inner);
            }
        }

        /// <summary>The exception of a Connect error object <c>{"code": "...", "message": "..."}</c>.</summary>
        public static CoreAIRuntimeException FromErrorJson(JObject error, ConnectCode fallback)
        {
            if (error == null)
            {
                return Create(fallback, null);
            }
            JToken code = error["code"];
            JToken message = error["message"];
            ConnectCode parsed = code != null && code.Type == JTokenType.String ? ParseCode((string)code) : fallback;
            CoreAIRuntimeException exception = Create(parsed, message != null && message.Type == JTokenType.String ? (string)message : null);
            exception.RetryAfter = RetryAfter(error["details"] as JArray);
            return exception;
        }

        /// <summary>The delay of a <c>google.rpc.RetryInfo</c> among an error's details, or null.</summary>
        internal static TimeSpan? RetryAfter(JArray details)
        {
            if (details == null)
            {
                return null;
            }
            foreach (JToken detail in details)
            {
                JObject item = detail as JObject;
                JToken type = item != null ? item["type"] : null;
                JToken value = item != null ? item["value"] : null;
                if (type == null || value == null || type.Type != JTokenType.String || value.Type != JTokenType.String
                    || (string)type != "google.rpc.RetryInfo")
                {
                    continue;
                }
                try
                {
                    string text = (string)value;
                    text = text.Replace('-', '+').Replace('_', '/').PadRight(text.Length + (4 - text.Length % 4) % 4, '=');
                    return DecodeRetryInfo(Convert.FromBase64String(text));
                }
                catch (FormatException)
                {
                    return null;
                }
            }
            return null;
        }

        /// <summary>Reads <c>RetryInfo { Duration retry_delay = 1; }</c>, <c>Duration { int64 seconds = 1; int32 nanos = 2; }</c>
        /// from protobuf's binary form (no protobuf library in a Unity project); null when it is not that.</summary>
        private static TimeSpan? DecodeRetryInfo(byte[] data)
        {
            int at = 0;
            while (at < data.Length)
            {
                ulong tag = ReadVarint(data, ref at);
                if (tag == 0x0A)
                {
                    int length = (int)ReadVarint(data, ref at);
                    int end = at + length;
                    if (length < 0 || end > data.Length)
                    {
                        throw new FormatException("truncated RetryInfo");
                    }
                    long seconds = 0, nanos = 0;
                    while (at < end)
                    {
                        ulong field = ReadVarint(data, ref at);
                        if (field == 0x08)
                        {
                            seconds = (long)ReadVarint(data, ref at);
                        }
                        else if (field == 0x10)
                        {
                            nanos = (long)ReadVarint(data, ref at);
                        }
                        else
                        {
                            throw new FormatException("unexpected field in Duration");
                        }
                    }
                    return TimeSpan.FromTicks(seconds * TimeSpan.TicksPerSecond + nanos / 100);
                }
                throw new FormatException("unexpected field in RetryInfo");
            }
            return TimeSpan.Zero;  // a RetryInfo with no delay: retry at once
        }

        private static ulong ReadVarint(byte[] data, ref int at)
        {
            ulong value = 0;
            for (int shift = 0; shift < 64; shift += 7)
            {
                if (at >= data.Length)
                {
                    throw new FormatException("truncated varint");
                }
                byte b = data[at++];
                value |= (ulong)(b & 0x7F) << shift;
                if ((b & 0x80) == 0)
                {
                    return value;
                }
            }
            throw new FormatException("varint too long");
        }

        /// <summary>The exception of a failed unary response: its JSON error body, else its HTTP status.</summary>
        public static CoreAIRuntimeException FromUnaryResponse(int httpStatus, string body)
        {
            ConnectCode fallback = FromHttpStatus(httpStatus);
            JObject error = TryParseObject(body);
            if (error == null || error["code"] == null)
            {
                return Create(fallback, "HTTP " + httpStatus + " from the CoreAI runtime");
            }
            return FromErrorJson(error, fallback);
        }

        /// <summary>The exception carried by a stream's end message, or null when the stream ended cleanly.</summary>
        public static CoreAIRuntimeException FromEndOfStream(string json)
        {
            JObject end = TryParseObject(json);
            if (end == null)
            {
                return string.IsNullOrWhiteSpace(json) ? null : Create(ConnectCode.Internal, "unreadable end-of-stream message");
            }
            JObject error = end["error"] as JObject;
            return error == null ? null : FromErrorJson(error, ConnectCode.Unknown);
        }

        private static JObject TryParseObject(string json)
        {
            if (string.IsNullOrWhiteSpace(json))
            {
                return null;
            }
            try
            {
                return JToken.Parse(json) as JObject;
            }
            catch (Newtonsoft.Json.JsonException)
            {
                return null;
            }
        }
    }
}
