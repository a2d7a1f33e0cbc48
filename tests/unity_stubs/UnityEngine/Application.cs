using System;

namespace UnityEngine
{
    /// <summary>
    /// Access to application run-time data (stub: values are settable through StubState). As in Unity, the path and
    /// name properties and isPlaying may only be read on the main thread (a UnityException elsewhere); platform and
    /// isEditor are thread-safe.
    /// </summary>
    public class Application
    {
        /// <summary>A directory path where data that is kept between runs can be stored.</summary>
        public static string persistentDataPath
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_persistentDataPath");
                return StubState.PersistentDataPath;
            }
        }

        /// <summary>The path to the game data folder (Assets in the Editor).</summary>
        public static string dataPath
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_dataPath");
                return StubState.DataPath;
            }
        }

        /// <summary>True in a player, or in the Editor in Play Mode.</summary>
        public static bool isPlaying
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_isPlaying");
                return StubState.IsPlaying;
            }
        }

        /// <summary>True inside the Unity Editor, false in a player.</summary>
        public static bool isEditor { get { return StubState.IsEditor; } }

        /// <summary>The player's StreamingAssets folder (Assets/StreamingAssets in the Editor).</summary>
        public static string streamingAssetsPath
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_streamingAssetsPath");
                return StubState.StreamingAssetsPath;
            }
        }

        /// <summary>The product name from the Player settings.</summary>
        public static string productName
        {
            get
            {
                StubEngine.ThrowIfNotMainThread("get_productName");
                return StubState.ProductName;
            }
        }

        /// <summary>The platform the application is running on.</summary>
        public static RuntimePlatform platform { get { return StubState.Platform; } }

        /// <summary>Raised when the player quits, and in the Editor when Play Mode ends.</summary>
        public static event Action quitting;

        internal static void RaiseQuitting()
        {
            Action handler = quitting;
            if (handler != null) handler();
        }
    }

    /// <summary>The platform the application is running on (the members the package handles; Unity has more, same values).</summary>
    public enum RuntimePlatform
    {
        /// <summary>In the Unity editor on macOS.</summary>
        OSXEditor = 0,
        /// <summary>In the player on macOS.</summary>
        OSXPlayer = 1,
        /// <summary>In the player on Windows.</summary>
        WindowsPlayer = 2,
        /// <summary>In the Unity editor on Windows.</summary>
        WindowsEditor = 7,
        /// <summary>In the player on the iPhone.</summary>
        IPhonePlayer = 8,
        /// <summary>In the player on Android devices.</summary>
        Android = 11,
        /// <summary>In the player on Linux.</summary>
        LinuxPlayer = 13,
        /// <summary>In the Unity editor on Linux.</summary>
        LinuxEditor = 16,
        /// <summary>In the player on WebGL.</summary>
        WebGLPlayer = 17,
        /// <summary>In the player on the PlayStation 4.</summary>
        PS4 = 25,
        /// <summary>In the player on Xbox One.</summary>
        XboxOne = 27,
        /// <summary>In the player on the Apple TV.</summary>
        tvOS = 31,
        /// <summary>In the player on Nintendo Switch.</summary>
        Switch = 32,
        /// <summary>In the player on the PlayStation 5.</summary>
        PS5 = 38,
        /// <summary>In the server on Linux.</summary>
        LinuxServer = 43,
        /// <summary>In the server on Windows.</summary>
        WindowsServer = 44,
        /// <summary>In the server on macOS.</summary>
        OSXServer = 45,
    }

    /// <summary>Stub only: the values the stubbed API returns (engine state: a fake domain reload keeps it). Not part of Unity's API.</summary>
    [StubEngineState]
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

        /// <summary>Value of Application.platform.</summary>
        public static RuntimePlatform Platform = RuntimePlatform.LinuxEditor;
    }

    /// <summary>Thrown by Unity's API when it is used where it may not be (off the main thread, for one).</summary>
    public class UnityException : SystemException
    {
        /// <summary>An exception with a message.</summary>
        public UnityException(string message) : base(message)
        {
        }
    }

    /// <summary>Stub only: marks a type whose static state is the engine's, kept by a fake domain reload. Not part of Unity's API.</summary>
    [AttributeUsage(AttributeTargets.Class, Inherited = false)]
    public sealed class StubEngineStateAttribute : Attribute
    {
    }
}
