using System.Runtime.CompilerServices;

// Hosting (the launcher) probes health, reads the transport's TLS and JSON helpers and marks its state file [Preserve].
[assembly: InternalsVisibleTo("CoreAI.Hosting")]
// The Unity layer resets the Client's static state at every play (CoreAI.StaticState).
[assembly: InternalsVisibleTo("CoreAI.Runtime.Unity")]
// The test assemblies: the package's NUnit tests (names from their asmdefs) and the pytest harness's own scenarios
// (tests/unity_layer/csharp). tests/unity_layer/test_package.py checks that this list and the asmdefs agree.
[assembly: InternalsVisibleTo("CoreAI.Tests.Editor")]
[assembly: InternalsVisibleTo("CoreAI.Tests.Runtime")]
[assembly: InternalsVisibleTo("CoreAI.Tests.UnityLayer")]
