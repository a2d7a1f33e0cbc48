namespace UnityEngine
{
    /// <summary>Access to application run-time data (stub: values are settable through StubState).</summary>
    public class Application
    {
        /// <summary>A directory path where data that is kept between runs can be stored.</summary>
        public static string persistentDataPath { get { return StubState.PersistentDataPath; } }

        /// <summary>The path to the game data folder (Assets in the Editor).</summary>
        public static string dataPath { get { return StubState.DataPath; } }

        /// <summary>True in a player, or in the Editor in Play Mode.</summary>
        public static bool isPlaying { get { return StubState.IsPlaying; } }

        /// <summary>True inside the Unity Editor, false in a player.</summary>
        public static bool isEditor { get { return StubState.IsEditor; } }

        /// <summary>The player's StreamingAssets folder (Assets/StreamingAssets in the Editor).</summary>
        public static string streamingAssetsPath { get { return StubState.StreamingAssetsPath; } }

        /// <summary>The product name from the Player settings.</summary>
        public static string productName { get { return StubState.ProductName; } }
    }

    /// <summary>Stub only: the values the stubbed API returns. Not part of Unity's API.</summary>
    public static class StubState
    {
        /// <summary>Value of Application.persistentDataPath.</summary>
        public static string PersistentDataPath = "";

        /// <summary>Value of Application.dataPath.</summary>
        public static string DataPath = "";

        /// <summary>Value of Application.isPlaying.</summary>
        public static bool IsPlaying;

        /// <summary>Value of Application.isEditor.</summary>
        public static bool IsEditor;

        /// <summary>Value of Application.streamingAssetsPath.</summary>
        public static string StreamingAssetsPath = "";

        /// <summary>Value of Application.productName.</summary>
        public static string ProductName = "StubProduct";
    }
}
