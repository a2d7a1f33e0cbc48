"""The client API over a scripted transport (no socket, no runtime): the role policy is pushed before the first turn,
the scope of a request without one comes from the GameHost (a Multiplayer Play Mode virtual player's own), and the
runtime's answer becomes the familiar result."""

from __future__ import annotations

import json

from tests.unity.conftest import wait


def test_a_turn_over_the_fake_transport_pushes_the_role_and_carries_the_default_scope(scenarios) -> None:
    from CoreAI.Ai import AgentMemoryPolicy, AgentMemoryScope, AiTaskRequest
    from CoreAI.Tests.UnityLayer import FakeTransport

    fake = FakeTransport()
    fake.Answer("RunTask", json.dumps({"status": "TURN_STATUS_OK", "text": "Welcome, traveller."}))
    policy = AgentMemoryPolicy()
    policy.ConfigureRole("Blacksmith")
    client = fake.Client(policy, AgentMemoryScope.ForUser("virtual-player-p2"))
    orchestrator = client.CreateOrchestrator()
    request = AiTaskRequest()
    request.RoleId, request.Hint = "Blacksmith", "Hello"
    assert wait(orchestrator.RunTaskAsync(request)) == "Welcome, traveller."
    methods = [c.Method for c in fake.Calls]
    assert methods == ["ConfigureRole", "RunTask"], "the role is pushed before its first turn"
    sent = json.loads(fake.Calls[1].Request)
    assert sent["target"]["roleId"] == "Blacksmith" and sent["hint"] == "Hello"
    assert sent["target"]["scope"]["userId"] == "virtual-player-p2"

    explicit = AiTaskRequest()
    explicit.RoleId, explicit.Hint, explicit.Scope = "Blacksmith", "Hi", AgentMemoryScope.ForUser("save-slot-1")
    wait(orchestrator.RunTaskAsync(explicit))
    assert json.loads(fake.Calls[-1].Request)["target"]["scope"]["userId"] == "save-slot-1", (
        "a scope the game passes wins")
    assert [c.Method for c in fake.Calls].count("ConfigureRole") == 1, "pushed once while it did not change"
