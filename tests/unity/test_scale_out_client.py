"""The C# client in front of several runtimes: it names each call's conversation as the Python client does, and
behind the real balancer (the documented nginx configuration, two runtimes on one PostgreSQL) a turn with a game
tool, its tool result and the memory calls of the conversation reach one runtime over HTTP/1.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.scopes import AgentMemoryScope, conversation_id
from tests.support.internals import internal, member
from tests.support.scale_out import TOKEN, Deployment, scripted_deployment
from tests.unity.conftest import wait

SCRIPT: dict[str, object] = {"rules": [{"when": {"hint": "How much"}, "reply": "Let me see.",
                                      "tool_calls": [{"name": "quote_price", "arguments": {"item": "Steel"}}],
                                      "after_tools": "That is 45 gold."}],
                           "default": {"reply": "Aye."}}
SCOPES = [None, ("studio", "alex", "slot1", ""), ("studio", "alex", "", ""), ("", "", "", "topic")]


def _target(role: str, scope: tuple[str, str, str, str] | None, actor: str) -> Any:
    from CoreAI.V1 import AgentMemoryScopeProto, AgentTarget

    target = AgentTarget()
    target.RoleId, target.Actor = role, actor
    if scope is not None:
        proto = AgentMemoryScopeProto()
        proto.TenantId, proto.UserId, proto.SessionId, proto.TopicId = scope
        target.Scope = proto
    return target


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("actor", ["", "guard_7", "local", " guard_7 "])
@pytest.mark.parametrize("role", ["Innkeeper", " Innkeeper ", "Kuznéc ⚔️"])
def test_the_csharp_client_names_each_conversation_as_the_python_one(assemblies: Any, role: str, scope: Any,
                                                                     actor: str) -> None:
    from CoreAI.V1 import LoadStateRequest

    affinity = internal("CoreAI.Runtime.ConversationAffinity")
    request = LoadStateRequest()
    request.Target = _target(role, scope, actor)
    python_scope = AgentMemoryScope(*(scope or ("", "", "", "")))
    assert affinity.Of(request) == conversation_id(role, python_scope, actor)


def test_calls_about_no_conversation_name_none_and_a_turn_without_a_role_is_creators(assemblies: Any) -> None:
    from CoreAI.V1 import HealthRequest, LoadStateRequest, RunTaskRequest, SubmitToolResultRequest

    affinity = internal("CoreAI.Runtime.ConversationAffinity")
    turn, load = RunTaskRequest(), LoadStateRequest()
    scope = SCOPES[1]
    assert scope is not None
    turn.Target = _target("", scope, "")
    load.Target = _target("  ", scope, "")
    assert affinity.Of(turn) == conversation_id("Creator", AgentMemoryScope(*scope))
    assert affinity.Of(load) is None  # refused by any runtime alike
    assert affinity.Of(HealthRequest()) is None and affinity.Of(SubmitToolResultRequest()) is None


@pytest.fixture
def deployment(tmp_path: Path, postgres_url: str) -> Iterator[Deployment]:
    started = scripted_deployment(tmp_path, postgres_url, SCRIPT)
    yield started
    started.stop()


def test_through_the_balancer_a_turn_its_tool_result_and_its_memory_calls_reach_one_runtime(
        assemblies: Any, deployment: Deployment) -> None:
    from CoreAI.Runtime import ConnectClientOptions, CoreAIRuntimeClient, TlsTrust
    from CoreAI.Tests import GameToolScenarios, SimulatedUnityMainThread
    from CoreAI.V1 import ApplyMemoryToolRequest
    from System.Threading import CancellationToken

    options = ConnectClientOptions()
    options.BaseUrl, options.Token = deployment.connect_url, TOKEN
    options.TrustedCertificate = TlsTrust.FromPem(deployment.certificates.ca_cert.read_text())
    client = CoreAIRuntimeClient(options)
    main = SimulatedUnityMainThread()
    try:
        for _ in range(3):  # each turn's tool result must follow its stream to the runtime running the turn
            report = wait(GameToolScenarios.RoundTripAsync(main, client, False))
            tool = report.Result.ToolResults[0]
            assert (list(report.Seen), tool.Success, tool.Content, report.Result.Text) == (
                ["Steel"], True, "45 gold", "Let me see.\n\nThat is 45 gold.")
        write = ApplyMemoryToolRequest()
        write.Target, write.Action, write.Content = _target("Smith", None, ""), "append", "likes steel"
        assert wait(member(client, "MemoryStore").ApplyMemoryToolAsync(write, None, CancellationToken(False))).Success
        wait(client.HealthAsync())
    finally:
        main.Dispose()
        client.Dispose()
    smith = conversation_id("Smith")
    expected = [*[("SubmitToolResult", smith), ("StreamTask", smith)] * 3, ("ApplyMemoryTool", smith), ("Health", "")]
    logged = deployment.access_lines(at_least=len(expected))
    lines = [line for line in logged if not line.rpc.endswith("/ConfigureRole")]
    # Logged as they end: a tool's result before the stream that waited for it.
    assert [(line.rpc.split("/")[1], line.conversation) for line in lines] == expected
    assert len({line.served_by for line in lines[:-1]}) == 1 and {line.status for line in lines} == {200}
