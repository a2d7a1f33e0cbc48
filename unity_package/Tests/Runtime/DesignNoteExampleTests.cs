using System.Collections;
using System.Threading.Tasks;
using CoreAI.Ai;
using NUnit.Framework;
using UnityEngine.TestTools;

namespace CoreAI.Tests
{
    /// <summary>The design note's examples (Scenarios/DesignNoteExamples.cs) against a runtime, checked from the game's side.</summary>
    [TestFixture]
    public sealed class DesignNoteExampleTests
    {
        [UnityTest]
        public IEnumerator Example1TheMemoryToolKeepsTheCraft()
        {
            Task<ExampleOutcome> run = DesignNoteExamples.Example1Async(RuntimeUnderTest.Url, RuntimeUnderTest.Token);
            yield return TaskSteps.Await(run);
            ExampleOutcome outcome = run.Result;
            Assert.AreEqual(2, outcome.Turns.Count);
            foreach (AiTaskResult turn in outcome.Turns)
            {
                // A turn ran on the model; a test model's tool JSON may end the tool loop instead of replying.
                Assert.That(turn.Status == AiTaskStatus.Ok || turn.Status == AiTaskStatus.ToolLoopEnded, turn.Error);
            }
            Assert.IsTrue(outcome.ToolResult.Success, outcome.ToolResult.Message);
            StringAssert.EndsWith("Craft#1: Iron Fireblade damage:45 fire:15", outcome.State.Memory);
        }

        [UnityTest]
        public IEnumerator Example2PlainChatKeepsTheDialogue()
        {
            Task<ExampleOutcome> run = DesignNoteExamples.Example2Async(RuntimeUnderTest.Url, RuntimeUnderTest.Token);
            yield return TaskSteps.Await(run);
            ExampleOutcome outcome = run.Result;
            Assert.AreEqual(2, outcome.Turns.Count);
            Assert.IsTrue(outcome.Turns[0].Succeeded, outcome.Turns[0].Error);
            Assert.IsTrue(outcome.Turns[1].Succeeded, outcome.Turns[1].Error);
            Assert.IsTrue(outcome.Config.Memory.PersistChatHistory);
            Assert.IsTrue(AgentMemoryPolicy.Default.GetConfig("MyChat").PersistChatHistory);
        }

        [UnityTest]
        public IEnumerator Example3MemoryOffForEveryBuiltInRole()
        {
            Task<ExampleOutcome> run = DesignNoteExamples.Example3Async(RuntimeUnderTest.Url, RuntimeUnderTest.Token);
            yield return TaskSteps.Await(run);
            foreach (string role in AgentMemoryPolicy.BuiltInRoleIds)
            {
                Assert.IsFalse(run.Result.Policy.GetConfig(role).UseMemoryTool, role);
            }
        }

        [Test]
        public void RecommendedOptInsBuildTheirRoles()
        {
            ExampleOutcome outcome = DesignNoteExamples.RecommendedOptIns(new AgentMemoryPolicy());
            Assert.AreEqual(3, outcome.Configs.Count);
            Assert.AreEqual(MemoryToolAction.Write, outcome.Configs[0].Memory.DefaultAction);
            Assert.IsTrue(outcome.Configs[1].Memory.PersistChatHistory);
            Assert.IsFalse(outcome.Configs[2].Memory.PersistChatHistory);
            Assert.IsTrue(outcome.Policy.IsKnown("BlacksmithNPC"));
        }
    }
}
