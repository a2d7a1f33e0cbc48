"""What the Core assembly shows a Unity developer (docs/unity.md#public-api): the familiar API public, the transport's
plumbing internal, reached by the test assemblies through InternalsVisibleTo and by pytest through
tests/support/internals.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.internals import clr_type, internal, member

INTERNAL = ("CoreAI.Ai.ProtoMapping", "CoreAI.Runtime.ProtoJson", "CoreAI.Runtime.ProtoInt64Converter",
            "CoreAI.Runtime.ProtoEnumConverter", "CoreAI.Runtime.ConnectEnvelope", "CoreAI.Runtime.ConnectErrors",
            "CoreAI.Runtime.ConnectClient", "CoreAI.Runtime.CallOptions", "CoreAI.V1.MemoryStoreClient",
            "CoreAI.V1.OrchestratorClient", "CoreAI.StaticState")
PUBLIC = ("CoreAI.Ai.AgentBuilder", "CoreAI.Ai.AgentMemoryPolicy", "CoreAI.Ai.AiOrchestrator",
          "CoreAI.Ai.AiTaskRequest", "CoreAI.Ai.AiTaskResult", "CoreAI.Ai.IAgentMemoryStore",
          "CoreAI.Ai.RuntimeAgentMemoryStore", "CoreAI.Ai.GameTool", "CoreAI.Runtime.CoreAIRuntimeClient",
          "CoreAI.Runtime.ConnectClientOptions", "CoreAI.Runtime.TlsTrust", "CoreAI.Launcher.RuntimeLauncher",
          "CoreAI.Downloads.ModelStore", "CoreAI.V1.CutReport", "CoreAI.V1.HealthResponse")


def test_the_plumbing_is_internal_and_the_familiar_api_public(assemblies: Path) -> None:
    for name in INTERNAL:
        assert not clr_type(name).IsVisible, name
    for name in PUBLIC:
        assert clr_type(name).IsVisible, name
    client = clr_type("CoreAI.Runtime.CoreAIRuntimeClient")
    public = {m.Name for m in client.GetMembers()}
    assert not {"GuardAsync", "MemoryStore", "Orchestrator"} & public
    assert {"CreateOrchestrator", "CreateMemoryStore", "HealthAsync", "ListRolesAsync", "SyncPolicyAsync"} <= public


def test_pythonnet_imports_only_public_types_and_the_helper_reaches_the_rest(assemblies: Path) -> None:
    with pytest.raises(ImportError):
        from CoreAI.Runtime import ProtoJson  # noqa: F401
    from CoreAI.Runtime import CoreAIRuntimeClient
    from CoreAI.V1 import ChatMessageProto

    message = ChatMessageProto()
    message.Role = "user"
    text = internal("CoreAI.Runtime.ProtoJson").Serialize(message)
    assert internal("CoreAI.Runtime.ProtoJson").Deserialize[ChatMessageProto](text).Role == "user"
    client = CoreAIRuntimeClient("http://127.0.0.1:9", None, None)
    try:
        assert member(client, "Orchestrator").GetType().FullName == "CoreAI.V1.OrchestratorClient"
    finally:
        client.Dispose()
