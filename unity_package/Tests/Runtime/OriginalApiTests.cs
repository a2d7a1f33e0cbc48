using System.Collections;
using System.Threading.Tasks;
using CoreAI.Ai;
using NUnit.Framework;
using UnityEngine.TestTools;

namespace CoreAI.Tests
{
    /// <summary>Code in the design note's original style (Scenarios/OriginalApi.cs) compiles and behaves.</summary>
    [TestFixture]
    public sealed class OriginalApiTests
    {
        [UnityTest]
        public IEnumerator TheOriginalFormsWork()
        {
            Task<OriginalApiOutcome> run = OriginalApi.RunAsync(RuntimeUnderTest.Url, RuntimeUnderTest.Token);
            yield return TaskSteps.Await(run);
            OriginalApiOutcome outcome = run.Result;
            RoleMemoryConfig merchant = outcome.Policy.GetConfig("Merchant");
            Assert.IsTrue(merchant.WithChatHistory && merchant.UseMemoryTool);
            Assert.AreEqual(MemoryToolAction.Write, merchant.DefaultAction);
            StringAssert.Contains("allowDuplicateToolCalls", outcome.DuplicateCallsError);
            Assert.IsNull(outcome.Policy.GetConfig("Creator").MaxOutputTokens);  // 0 = unlimited
            Assert.IsNotNull(outcome.Reply);
            Assert.AreEqual(2, outcome.VersionCount);
            Assert.IsTrue(outcome.Reverted);
            Assert.IsFalse(outcome.RevertedUnknown);
            StringAssert.Contains("999", outcome.RevertError);
            Assert.AreEqual("first", outcome.MemoryAfterRevert);
            Assert.AreEqual("user:Forge me a sword", outcome.History[0]);
            Assert.AreEqual("assistant:welcome", outcome.History[outcome.History.Count - 1]);
            Assert.AreEqual(0, outcome.HistoryAfterClear);
            Assert.IsFalse(outcome.LoadedAfterClear);
        }

        [Test]
        public void BadInputIsRefusedAndChangesNothing()
        {
            var policy = new AgentMemoryPolicy();
            long revision = policy.Revision;
            Assert.Throws<System.NotSupportedException>(() => policy.ConfigureRole("Merchant", true, null, true));
            Assert.Throws<System.ArgumentOutOfRangeException>(() => policy.SetMaxOutputTokens("Merchant", -1));
            Assert.AreEqual(revision, policy.Revision);
        }
    }
}
