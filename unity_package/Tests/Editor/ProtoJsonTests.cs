using CoreAI.Runtime;
using NUnit.Framework;
using V1 = CoreAI.V1;

namespace CoreAI.Tests
{
    /// <summary>The C# side of proto3 JSON (internal ProtoJson); tests/unity/test_codec_and_json.py checks it against protobuf's own.</summary>
    [TestFixture]
    public sealed class ProtoJsonTests
    {
        [Test]
        public void Int64TravelsAsAStringBothWays()
        {
            const long big = 9007199254740993;  // 2^53 + 1: a JSON number (a double) would lose it
            string text = ProtoJson.Serialize(new V1.ChatMessageProto { Timestamp = big });
            StringAssert.Contains("\"timestamp\":\"9007199254740993\"", text);
            Assert.AreEqual(big, ProtoJson.Deserialize<V1.ChatMessageProto>(text).Timestamp);
            Assert.AreEqual(big, ProtoJson.Deserialize<V1.ChatMessageProto>("{\"timestamp\":9007199254740993}").Timestamp);
        }

        [Test]
        public void EnumsAreTheirProtoNamesAndUnsetOptionalsAreLeftOut()
        {
            var config = new V1.RoleMemoryConfigProto { RoleId = "Smith", ToolResultMemory = V1.ToolResultMemoryProto.ErrorsOnly };
            string text = ProtoJson.Serialize(config);
            StringAssert.Contains("\"toolResultMemory\":\"TOOL_RESULT_MEMORY_ERRORS_ONLY\"", text);
            StringAssert.DoesNotContain("useMemoryTool", text);  // a patch must not switch other settings off
            StringAssert.DoesNotContain("contextTokens", text);
        }

        [Test]
        public void WhatANewerRuntimeSendsIsTolerated()
        {
            V1.LoadStateResponse back = ProtoJson.Deserialize<V1.LoadStateResponse>(
                "{\"status\":\"LOAD_STATUS_FROM_THE_FUTURE\",\"newField\":1,\"reason\":\"r\"}");
            Assert.AreEqual(V1.LoadStatus.Unspecified, back.Status);
            Assert.AreEqual("r", back.Reason);
            Assert.AreEqual(V1.LoadStatus.Failed, ProtoJson.Deserialize<V1.LoadStateResponse>("{\"status\":3}").Status);
            Assert.IsNotNull(ProtoJson.Deserialize<V1.LoadStateResponse>(""));
        }
    }
}
