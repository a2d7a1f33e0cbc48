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
            return Create(parsed, message != null && message.Type == JTokenType.String ? (string)message : null);
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
