using System;
using System.Collections;
using System.Threading.Tasks;
using NUnit.Framework;

namespace CoreAI.Tests
{
    /// <summary>Waiting for a Task inside a [UnityTest] without blocking Unity's main thread (its continuations run there).</summary>
    public static class TaskSteps
    {
        /// <summary>Frames until `task` ends (`yield return TaskSteps.Await(task);`); its exception, unwrapped, fails the test.</summary>
        public static IEnumerator Await(Task task, double timeoutSeconds = 120)
        {
            DateTime until = DateTime.UtcNow.AddSeconds(timeoutSeconds);
            while (!task.IsCompleted)
            {
                if (DateTime.UtcNow > until) Assert.Fail("the task did not finish within " + timeoutSeconds + " s");
                yield return null;
            }
            task.GetAwaiter().GetResult();
        }
    }
}
