"""`build_orchestrator` and the per-model profile: one place decides tool mode and calls per round.

The factory reads a hosted server's configuration and GGUF, never the running engine: these run on the tiny model's
server prepared but not started, and a model double answers the turn."""

from __future__ import annotations

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.hosting.llama_server import SMALL_MODEL_MAX_BYTES
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.testing import RecordingModel
from pyruntime.turns import AiTaskRequest, ToolCallMode, build_orchestrator
from pyruntime.turns.factory import (
    HOSTED_STRUCTURED_CALLS_PER_ROUND,
    ModelProfile,
    model_profile,
)
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND
from pyruntime.turns.writer.decision import MemoryDesign
from tests.support.doubles import run

NOWHERE = "http://127.0.0.1:9/v1"  # a server we do not run (never contacted: the factory only builds a client)


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


def test_a_hosted_server_gets_structured_mode_with_one_call_in_the_grammar(prepared_server: LlamaServerProcess
                                                                          ) -> None:
    # The tiny test model is a small model: by default it gets the writer pass, not the tool in its reply.
    default = build_orchestrator(server=prepared_server, client=RecordingModel(["Hello."]))
    assert default.settings.memory_design is MemoryDesign.WRITER
    model = RecordingModel(["Hello."])
    orchestrator = build_orchestrator(server=prepared_server, memory_design="tool", client=model)
    assert (orchestrator.settings.tool_mode, orchestrator.settings.max_calls_per_round) == (ToolCallMode.STRUCTURED, 1)
    assert orchestrator.settings.model_context_tokens == prepared_server.config.n_ctx == 2048
    assert orchestrator.queue.capacity == prepared_server.config.slots

    result = run(orchestrator.run_task(AiTaskRequest(hint="hi", role_id="SmartChat", max_output_tokens=16)))
    assert (result.ok, result.text) == (True, "Hello.")
    [request] = model.requests
    assert request.tool_names == ("memory",) and request.tools == []  # offered in the grammar, not natively
    assert request.schema is not None and request.schema["properties"]["tool_calls"]["maxItems"] == 1


def test_an_external_url_gets_native_mode_and_explicit_settings_win() -> None:
    external = build_orchestrator(base_url=NOWHERE)
    assert (external.settings.tool_mode, external.settings.max_calls_per_round) == (
        ToolCallMode.NATIVE, MAX_CALLS_PER_ROUND)
    chosen = build_orchestrator(base_url=NOWHERE, tool_mode="structured", max_calls_per_round=2)
    assert (chosen.settings.tool_mode, chosen.settings.max_calls_per_round) == (ToolCallMode.STRUCTURED, 2)
    for orchestrator in (external, chosen):
        run(orchestrator.client.aclose())


def test_the_prewarm_is_on_for_a_hosted_model_only(prepared_server: LlamaServerProcess) -> None:
    # A server we do not run may keep no prefix, and each prewarm is one more request to it.
    hosted = build_orchestrator(server=prepared_server)
    external = build_orchestrator(base_url=prepared_server.base_url)
    switched_off = build_orchestrator(server=prepared_server, prewarm=False)
    assert (hosted.settings.prewarm, external.settings.prewarm, switched_off.settings.prewarm) == (True, False, False)

    async def close() -> None:
        for orchestrator in (hosted, external, switched_off):
            await orchestrator.client.aclose()

    run(close())
