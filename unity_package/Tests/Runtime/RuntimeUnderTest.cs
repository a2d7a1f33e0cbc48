using System;
using NUnit.Framework;

namespace CoreAI.Tests
{
    /// <summary>
    /// The runtime the play-mode tests talk to, from the environment: COREAI_TEST_RUNTIME_URL (its Connect address) and
    /// COREAI_TEST_RUNTIME_TOKEN. In Unity, start one first (`coreai-runtime serve --scripted-model script.json` or any
    /// runtime; docs/unity.md#testing-your-game) and set both before opening the editor; here the pytest harness sets
    /// them to a fresh runtime for every test.
    /// </summary>
    public static class RuntimeUnderTest
    {
        /// <summary>The variable holding the runtime's Connect URL.</summary>
        public const string UrlVariable = "COREAI_TEST_RUNTIME_URL";

        /// <summary>The variable holding its bearer token.</summary>
        public const string TokenVariable = "COREAI_TEST_RUNTIME_TOKEN";

        /// <summary>The runtime's URL; without one the test is ignored with what to set (never a silent pass).</summary>
        public static string Url
        {
            get
            {
                string url = Environment.GetEnvironmentVariable(UrlVariable);
                if (string.IsNullOrEmpty(url))
                {
                    Assert.Ignore("no runtime to test against: start one and set " + UrlVariable + " and " + TokenVariable);
                }
                return url;
            }
        }

        /// <summary>The runtime's token (null: none).</summary>
        public static string Token
        {
            get { return Environment.GetEnvironmentVariable(TokenVariable); }
        }
    }
}
