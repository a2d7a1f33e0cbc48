using System.IO;
using System.Threading;
using CoreAI.Runtime;
using NUnit.Framework;

namespace CoreAI.Tests
{
    /// <summary>Connect's stream envelopes (internal ConnectEnvelope): a flags byte, a big-endian length, the payload.</summary>
    [TestFixture]
    public sealed class ConnectEnvelopeTests
    {
        [Test]
        public void AnEnvelopeIsFlagsThenBigEndianLengthThenPayload()
        {
            byte[] encoded = ConnectEnvelope.Encode(2, "{}");
            CollectionAssert.AreEqual(new byte[] { 2, 0, 0, 0, 2, (byte)'{', (byte)'}' }, encoded);
        }

        [Test]
        public void EnvelopesReadBackInOrderUntilACleanEnd()
        {
            var stream = new MemoryStream();
            foreach (byte[] part in new[] { ConnectEnvelope.Encode(0, "{\"a\":1}"), ConnectEnvelope.Encode(2, "{}") })
            {
                stream.Write(part, 0, part.Length);
            }
            stream.Position = 0;
            ConnectEnvelope first = ConnectEnvelope.ReadAsync(stream, CancellationToken.None).GetAwaiter().GetResult();
            ConnectEnvelope end = ConnectEnvelope.ReadAsync(stream, CancellationToken.None).GetAwaiter().GetResult();
            Assert.AreEqual("{\"a\":1}", first.Text);
            Assert.IsFalse(first.IsEndStream);
            Assert.IsTrue(end.IsEndStream);
            Assert.IsNull(ConnectEnvelope.ReadAsync(stream, CancellationToken.None).GetAwaiter().GetResult());
        }

        [Test]
        public void ATruncatedEnvelopeIsAnInternalError()
        {
            var stream = new MemoryStream(new byte[] { 0, 0, 0, 0, 5, (byte)'a' });
            Assert.Throws<InternalException>(() => ConnectEnvelope.ReadAsync(stream, CancellationToken.None).GetAwaiter().GetResult());
        }
    }
}
