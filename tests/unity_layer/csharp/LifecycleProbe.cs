// A scene script that records the messages Unity sends it, and state a domain reload keeps or drops.
using System;
using System.Collections.Generic;
using UnityEngine;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>Records Awake, OnEnable, OnApplicationQuit, OnDisable and OnDestroy, in order.</summary>
    public sealed class LifecycleProbe : MonoBehaviour
    {
        /// <summary>Static state: a domain reload drops it.</summary>
        public static int StaticCounter;

        [SerializeField] private List<string> calls = new List<string>();  // serialized: kept by a reload
        private string note = "fresh";  // not serialized: a reload gives it a new instance's value

        /// <summary>Where each message is also reported (set by the test; not serialized either).</summary>
        public Action<string> Report;

        /// <summary>The messages so far.</summary>
        public List<string> Calls => calls;

        /// <summary>A field Unity does not serialize.</summary>
        public string Note
        {
            get { return note; }
            set { note = value; }
        }

        private void Awake() { Record("Awake"); }

        private void OnEnable() { Record("OnEnable"); }

        private void OnApplicationQuit() { Record("OnApplicationQuit"); }

        private void OnDisable() { Record("OnDisable"); }

        private void OnDestroy() { Record("OnDestroy"); }

        private void Record(string message)
        {
            calls.Add(message);
            if (Report != null) Report(message);
        }
    }

    /// <summary>What only C# can ask of Unity's objects.</summary>
    public static class UnityChecks
    {
        /// <summary>Reads `member` of Unity's API on a new thread: "value: …" or "ExceptionType: message".</summary>
        public static string OffTheMainThread(string member)
        {
            string outcome = null;
            var thread = new System.Threading.Thread(() =>
            {
                try
                {
                    outcome = "value: " + Read(member);
                }
                catch (Exception e)
                {
                    outcome = e.GetType().Name + ": " + e.Message;
                }
            });
            thread.Start();
            thread.Join();
            return outcome;
        }

        private static object Read(string member)
        {
            switch (member)
            {
                case "persistentDataPath": return Application.persistentDataPath;
                case "dataPath": return Application.dataPath;
                case "isPlaying": return Application.isPlaying;
                case "productName": return Application.productName;
                case "streamingAssetsPath": return Application.streamingAssetsPath;
                case "platform": return Application.platform;
                case "isEditor": return Application.isEditor;
                case "new GameObject": return new GameObject("off the main thread");
                case "EditorApplication.isPlaying": return UnityEditor.EditorApplication.isPlaying;
                case "AssetDatabase.FindAssets": return UnityEditor.AssetDatabase.FindAssets("t:Object");
                default: throw new ArgumentException(member);
            }
        }

        /// <summary>Unity's `obj == null`: true for a destroyed object too.</summary>
        public static bool IsNull(UnityEngine.Object obj)
        {
            return obj == null;
        }
    }
}
