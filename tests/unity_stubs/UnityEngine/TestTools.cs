// Stub of the Unity Test Framework's UnityEngine.TestTools (UnityEngine.TestRunner.dll in Unity): the attribute the
// package's play-mode tests use. In Unity it builds the test; here the pytest runner (tests/support/nunit.py) reads it.
using System;

namespace UnityEngine.TestTools
{
    /// <summary>A test that runs as a coroutine (yield return null waits one frame).</summary>
    [AttributeUsage(AttributeTargets.Method, AllowMultiple = false, Inherited = false)]
    public sealed class UnityTestAttribute : Attribute
    {
    }
}
