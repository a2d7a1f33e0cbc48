using CoreAI.Ai;
using CoreAI.Runtime;
using NUnit.Framework;
using V1 = CoreAI.V1;

namespace CoreAI.Tests
{
    /// <summary>The role table, its push to the runtime (internal ProtoMapping) and its reset between plays.</summary>
    [TestFixture]
    public sealed class AgentMemoryPolicyTests
    {
        [TearDown]
        public void FreshDefault()
        {
            StaticState.Reset();  // what every play starts with
        }

        [Test]
        public void ABuiltRoleMapsToAFullConfigureRolePatch()
        {
            AgentConfig config = new AgentBuilder("BlacksmithNPC", new AgentMemoryPolicy()).WithMemory(MemoryToolAction.StrReplace)
                .WithChatHistory(4096, true).WithSystemPrompt("You forge.").Build();
            V1.RoleMemoryConfigProto proto = ProtoMapping.ToProto(config.Memory);
            Assert.AreEqual("BlacksmithNPC", proto.RoleId);
            Assert.AreEqual(V1.MemoryToolActionProto.StrReplace, proto.DefaultAction);
            Assert.AreEqual(4096, proto.ContextTokens);
            Assert.AreEqual(true, proto.PersistChatHistory);
            Assert.AreEqual("You forge.", proto.SystemPrompt);
            Assert.IsNull(proto.MaxOutputTokens);  // unset: the runtime keeps its own
            StringAssert.DoesNotContain("maxOutputTokens", ProtoJson.Serialize(proto));
        }

        [Test]
        public void EveryPlayStartsWithAFreshDefaultPolicy()
        {
            AgentMemoryPolicy played = AgentMemoryPolicy.Default;
            new AgentBuilder("Forgemaster").WithoutMemory().Build();
            Assert.IsFalse(played.GetConfig("Forgemaster").UseMemoryTool);
            StaticState.Reset();  // SubsystemRegistration, also with the domain reload off
            Assert.AreNotSame(played, AgentMemoryPolicy.Default);
            Assert.IsTrue(AgentMemoryPolicy.Default.GetConfig("Forgemaster").UseMemoryTool);
            Assert.IsFalse(AgentMemoryPolicy.Default.IsKnown("Forgemaster"));
        }
    }
}
