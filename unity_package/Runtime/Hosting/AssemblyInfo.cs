using System.Runtime.CompilerServices;

// The Editor's tests and the pytest harness's scenarios (tests/unity_layer/csharp) reach the spawner and the state file.
[assembly: InternalsVisibleTo("CoreAI.Tests.Editor")]
[assembly: InternalsVisibleTo("CoreAI.Tests.UnityLayer")]
