using NUnit.Framework;

namespace CoreAI.Tests
{
    /// <summary>Game-tool schemas (Scenarios/GameToolScenarios.cs): derived from the argument type's public members.</summary>
    [TestFixture]
    public sealed class GameToolTests
    {
        [Test]
        public void TheSchemaListsEveryPublicMemberAndRequiresTheNonOptionalOnes()
        {
            string schema = GameToolScenarios.SchemaOf();
            StringAssert.Contains("\"buyer\":{\"type\":\"string\",\"description\":\"Who buys.\"}", schema);
            StringAssert.Contains("\"metal\":{\"type\":\"string\",\"enum\":[\"Iron\",\"Steel\"]}", schema);
            StringAssert.Contains("\"required\":[\"buyer\",\"count\",\"weight\",\"rush\",\"metal\"]", schema);
            StringAssert.Contains("\"additionalProperties\":false", schema);
        }

        [Test]
        public void AnUnsupportedArgumentTypeIsNamed()
        {
            StringAssert.Contains("tool argument UnsupportedArgs.Items has type List`1", GameToolScenarios.UnsupportedSchema());
        }
    }
}
