"""`build_orchestrator` and the per-model profile: one place decides tool mode and calls per round."""

from __future__ import annotations

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.hosting.llama_server import SMALL_MODEL_MAX_BYTES
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.turns import AiTaskRequest, ToolCallMode, build_orchestrator
from pyruntime.turns.factory import (
    HOSTED_STRUCTURED_CALLS_PER_ROUND,
    ModelProfile,
    model_profile,
)
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND
from pyruntime.turns.writer.decision import MemoryDesign
from tests.turns.conftest import RecordingClient, run


def test_model_profile_per_server_kind_and_explicit_mode() -> None:
    assert model_profile(hosted=True) == ModelProfile(ToolCallMode.STRUCTURED, HOSTED_STRUCTURED_CALLS_PER_ROUND)
    assert model_profile(hosted=False) == ModelProfile(ToolCallMode.NATIVE, MAX_CALLS_PER_ROUND)
    # An explicit mode wins; the one-call limit belongs to the hosted model in structured mode only.
    assert model_profile(hosted=True, tool_mode="native") == ModelProfile(ToolCallMode.NATIVE, MAX_CALLS_PER_ROUND)
    assert model_profile(hosted=False, tool_mode=ToolCallMode.STRUCTURED) == ModelProfile(
        ToolCallMode.STRUCTURED, MAX_CALLS_PER_ROUND)
    with pytest.raises(InvalidArgumentError, match="unknown tool-call mode"):
        model_profile(hosted=True, tool_mode="json")


def test_model_profile_gives_the_writer_pass_to_small_hosted_models_only() -> None:
    small, large = 98_000_000, SMALL_MODEL_MAX_BYTES
    assert model_profile(hosted=True, model_bytes=small).memory_design is MemoryDesign.WRITER
    assert model_profile(hosted=True, model_bytes=large).memory_design is MemoryDesign.TOOL
    assert model_profile(hosted=True).memory_design is MemoryDesign.TOOL  # size unknown: the contract's tool
    # An external server keeps the memory tool (the interface for capable models) whatever its size.
    assert model_profile(hosted=False, model_bytes=small).memory_design is MemoryDesign.TOOL
    # An explicit design wins both ways.
    assert model_profile(hosted=False, memory_design="writer").memory_design is MemoryDesign.WRITER
    assert model_profile(hosted=True, model_bytes=small, memory_design=" TOOL ").memory_design is MemoryDesign.TOOL
    with pytest.raises(InvalidArgumentError, match="unknown memory design"):
        model_profile(hosted=True, memory_design="notes")


def test_a_hosted_server_gets_structured_mode_with_one_call_in_the_grammar(tiny_llama_server: LlamaServerProcess
                                                                          ) -> None:
    # The tiny test model is a small model: by default it gets the writer pass, not the tool in its reply.
    assert build_orchestrator(server=tiny_llama_server).settings.memory_design is MemoryDesign.WRITER
    client = RecordingClient(tiny_llama_server.base_url)
    orchestrator = build_orchestrator(server=tiny_llama_server, memory_design="tool", client=client)
    assert (orchestrator.settings.tool_mode, orchestrator.settings.max_calls_per_round) == (ToolCallMode.STRUCTURED, 1)

    async def go() -> None:
        try:
            await orchestrator.run_task(AiTaskRequest(hint="hi", role_id="SmartChat", max_output_tokens=16))
        finally:
            await client.aclose()

    run(go())
    schema = client.bodies[0]["response_format"]["schema"]
    assert schema["properties"]["tool_calls"]["maxItems"] == 1


def test_an_external_url_gets_native_mode_and_explicit_settings_win(tiny_server_url: str) -> None:
    external = build_orchestrator(base_url=tiny_server_url)
    assert (external.settings.tool_mode, external.settings.max_calls_per_round) == (
        ToolCallMode.NATIVE, MAX_CALLS_PER_ROUND)
    chosen = build_orchestrator(base_url=tiny_server_url, tool_mode="structured", max_calls_per_round=2)
    assert (chosen.settings.tool_mode, chosen.settings.max_calls_per_round) == (ToolCallMode.STRUCTURED, 2)
    for orchestrator in (external, chosen):
        run(orchestrator.client.aclose())


def test_the_prewarm_is_on_for_a_hosted_model_only(tiny_llama_server: LlamaServerProcess) -> None:
    # A server we do not run may keep no prefix, and each prewarm is one more request to it.
    hosted = build_orchestrator(server=tiny_llama_server)
    external = build_orchestrator(base_url=tiny_llama_server.base_url)
    switched_off = build_orchestrator(server=tiny_llama_server, prewarm=False)
    assert (hosted.settings.prewarm, external.settings.prewarm, switched_off.settings.prewarm) == (True, False, False)

    async def close() -> None:
        for orchestrator in (hosted, external, switched_off):
            await orchestrator.client.aclose()

    run(close())
