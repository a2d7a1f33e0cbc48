using System;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace CoreAI.Runtime
{
    /// <summary>One Connect streaming envelope: a flags byte, a big-endian uint32 length, the payload.</summary>
    internal sealed class ConnectEnvelope
    {
        /// <summary>Flag of a compressed payload (this client never asks for compression).</summary>
        public const byte CompressedFlag = 0x01;

        /// <summary>Flag of the end-of-stream message (JSON with an optional "error").</summary>
        public const byte EndStreamFlag = 0x02;

        /// <summary>Bytes before the payload.</summary>
        public const int HeaderLength = 5;

        /// <summary>The largest payload accepted (guards against a corrupt length).</summary>
        public const int MaxPayloadLength = 64 * 1024 * 1024;

        /// <summary>An envelope with these flags and payload.</summary>
        public ConnectEnvelope(byte flags, byte[] payload)
        {
            Flags = flags;
            Payload = payload ?? new byte[0];
        }

        /// <summary>The flags byte.</summary>
        public byte Flags { get; }

        /// <summary>The payload bytes.</summary>
        public byte[] Payload { get; }

        /// <summary>True for the end-of-stream message.</summary>
        public bool IsEndStream => (Flags & EndStreamFlag) != 0;

        /// <summary>True when the payload is compressed.</summary>
        public bool IsCompressed => (Flags & CompressedFlag) != 0;

        /// <summary>The payload as UTF-8 text.</summary>
        public string Text => Encoding.UTF8.GetString(Payload);

        /// <summary>The wire bytes of one envelope.</summary>
        public static byte[] Encode(byte flags, byte[] payload)
        {
            payload = payload ?? new byte[0];
            var bytes = new byte[HeaderLength + payload.Length];
            bytes[0] = flags;
            WriteLength(bytes, 1, payload.Length);
            Buffer.BlockCopy(payload, 0, bytes, HeaderLength, payload.Length);
            return bytes;
        }

        /// <summary>The wire bytes of one envelope holding UTF-8 text.</summary>
        public static byte[] Encode(byte flags, string text)
        {
            return Encode(flags, Encoding.UTF8.GetBytes(text ?? ""));
        }

        /// <summary>Reads the next envelope; null at a clean end of the stream (between envelopes).</summary>
        /// <exception cref="InternalException">The stream ends inside an envelope or a length is impossible.</exception>
        public static async Task<ConnectEnvelope> ReadAsync(Stream stream, CancellationToken cancellationToken)
        {
            var header = new byte[HeaderLength];
            int got = await ReadFullyAsync(stream, header, cancellationToken).ConfigureAwait(false);
            if (got == 0)
            {
                return null;
            }
            if (got < HeaderLength)
            {
                throw new InternalException("the stream ended inside an envelope header (" + got + " of 5 bytes)");
            }
            uint length = ((uint)header[1] << 24) | ((uint)header[2] << 16) | ((uint)header[3] << 8) | header[4];
            if (length > MaxPayloadLength)
            {
                throw new InternalException("envelope of " + length + " bytes exceeds the limit of " + MaxPayloadLength);
            }
            var payload = new byte[length];
            got = await ReadFullyAsync(stream, payload, cancellationToken).ConfigureAwait(false);
            if (got < payload.Length)
            {
                throw new InternalException("the stream ended inside an envelope (" + got + " of " + length + " bytes)");
            }
            return new ConnectEnvelope(header[0], payload);
        }

        private static void WriteLength(byte[] bytes, int offset, int length)
        {
            bytes[offset] = (byte)(length >> 24);
            bytes[offset + 1] = (byte)(length >> 16);
            bytes[offset + 2] = (byte)(length >> 8);
            bytes[offset + 3] = (byte)length;
        }

        private static async Task<int> ReadFullyAsync(Stream stream, byte[] buffer, CancellationToken cancellationToken)
        {
            int total = 0;
            while (total < buffer.Length)
            {
                int n = await stream.ReadAsync(buffer, total, buffer.Length - total, cancellationToken).ConfigureAwait(false);
                if (n == 0)
                {
                    break;
                }
                total += n;
            }
            return total;
        }
    }
}
