"""`build_orchestrator`: an `AiOrchestrator` wired from a server URL (or a hosted server) in one call.

The turn engine's one construction path: the runtime (pyruntime/app.py), the chat and games call it. The
per-model defaults (how tool calls travel, how many run per round, how memory is written, the context, the chat
template) are resolved here, in `turn_settings` from `model_profile`, into the `TurnSettings` the engine is built
with, so the chat, `serve` and games get the same behaviour from the same model; a caller's choices override them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyruntime.history import TokenCounter
from pyruntime.model.client.concurrency import DEFAULT_EXTERNAL_CONCURRENCY
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.model.client.seam import Gate, ModelClient
from pyruntime.model.hosting.llama_server import SMALL_MODEL_MAX_BYTES
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns.orchestrator import AiOrchestrator
from pyruntime.turns.planning.templates import model_accepts_later_system
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND, ToolCallMode
from pyruntime.turns.rounds.registry import ToolRegistry
from pyruntime.turns.settings import DEFAULT_MODEL_CONTEXT_TOKENS, TurnSettings
from pyruntime.turns.writer.decision import MemoryDesign

# A hosted small model in structured mode gets one tool call per round: SmolLM2-135M then stores a
# stated fact as often as with four, in half the median turn time and without runaway rounds
# (bench/bench_tool_modes.py).
HOSTED_STRUCTURED_CALLS_PER_ROUND = 1


@dataclass(frozen=True)
class ModelProfile:
    """The turn settings that suit a model server: how tool calls travel and how many run per round."""

    tool_mode: ToolCallMode
    max_calls_per_round: int
    memory_design: MemoryDesign = MemoryDesign.TOOL

    @property
    def memory_last(self) -> bool:
        """The memory-last prompt layout (planning/memory_last.py): for the writer design's models, too small to find
        a memory block across a saved history (SmolLM2-135M recalled 12/65 of the memory eval's questions with it
        in the head, 32/65 with it last; docs/benchmarks.md#recall-layouts)."""
        return self.memory_design is MemoryDesign.WRITER


def model_profile(*, hosted: bool, tool_mode: ToolCallMode | str | None = None, model_bytes: int | None = None,
                  memory_design: MemoryDesign | str | None = None) -> ModelProfile:
    """The defaults for a model we host (llama.cpp: structured, one call per round) or an external server.

    Structured calls need llama.cpp's schema grammar, so a server we do not run gets the OpenAI
    protocol (`native`) unless `tool_mode` says otherwise. An explicit `tool_mode` keeps the call
    limit measured for that mode. Memory: a small hosted model (`model_bytes` below
    `SMALL_MODEL_MAX_BYTES`) gets the writer pass after the reply, every other model the `memory`
    tool in its reply; an explicit `memory_design` wins (the writer needs a grammar: structured output).
    """
    mode = ToolCallMode.parse(tool_mode) if tool_mode is not None else (
        ToolCallMode.STRUCTURED if hosted else ToolCallMode.NATIVE)
    one_call = hosted and mode is ToolCallMode.STRUCTURED
    if memory_design is not None:
        design = MemoryDesign.parse(memory_design)
    else:
        # SmolLM2-135M stored 0 of 15 stated facts with the tool in its reply (docs/design/memory-writer.md).
        small = hosted and model_bytes is not None and model_bytes < SMALL_MODEL_MAX_BYTES
        design = MemoryDesign.WRITER if small else MemoryDesign.TOOL
    return ModelProfile(mode, HOSTED_STRUCTURED_CALLS_PER_ROUND if one_call else MAX_CALLS_PER_ROUND, design)


def turn_settings(*, hosted: bool, model_path: Path | None = None, model_context_tokens: int | None = None,
                  **choices: Any) -> TurnSettings:
    """The `TurnSettings` for a model: its `model_profile` (hosted by us or not, its file's size), its context
    (`model_context_tokens`; None: `DEFAULT_MODEL_CONTEXT_TOKENS`) and chat template (does it take a later system
    message?), with the prewarm on for a hosted model and compaction between turns; `choices` (`TurnSettings`
    fields) win, and a choice of None leaves the setting to the profile (or the default)."""
    # None is a choice only where it is a setting's value (the memory-last block's place: by the player's pace).
    given = {name: value for name, value in choices.items() if value is not None or name == "memory_last_stays"}
    model_bytes = _file_size(model_path) if hosted and model_path is not None else None
    profile = model_profile(hosted=hosted, tool_mode=given.pop("tool_mode", None), model_bytes=model_bytes,
                            memory_design=given.pop("memory_design", None))
    later_system = given.pop("system_messages_after_first", None)
    if later_system is None:
        later_system = model_accepts_later_system(model_path) if model_path is not None else True
    return TurnSettings(
        tool_mode=profile.tool_mode,
        max_calls_per_round=profile.max_calls_per_round,
        memory_design=profile.memory_design,
        memory_last=profile.memory_last,
        model_context_tokens=model_context_tokens or DEFAULT_MODEL_CONTEXT_TOKENS,
        system_messages_after_first=later_system,
        prewarm=hosted,
        background_compaction=True,
    ).but(**given)


def build_orchestrator(
    *,
    server: LlamaServerProcess | None = None,
    base_url: str | None = None,
    client: ModelClient | None = None,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    model: str | None = None,
    model_path: Path | None = None,
    model_context_tokens: int | None = None,
    stores: StoreBundle | None = None,
    data_dir: Path | None = None,
    policy: AgentMemoryPolicy | None = None,
    tools: ToolRegistry | None = None,
    exact_token_counts: bool | None = None,
    token_counter: TokenCounter | None = None,
    gate: Gate | None = None,
    concurrency: int | None = None,
    **choices: Any,
) -> AiOrchestrator:
    """An orchestrator for a hosted llama.cpp `server`, or any OpenAI-compatible `base_url`, or a `client`.

    `client`: the model the turns call, built by the caller (it keeps its own gate): an in-process double from
    `pyruntime.testing` on its own (the profile of a server we do not run, unless told), or a client of the
    `server` / `base_url` given with it (whose profile it then gets).

    With a `server`, the client talks to the engine directly (not through the public model port) in
    llama-server's dialect, each conversation in its own parallel slot, and the queue runs as many model
    calls at once as the engine has slots (`base_url` given too: that URL, as a plain OpenAI server).
    `concurrency`: the model calls a server we do not run is sent at once (`serve` asks the engine:
    model/client/concurrency.py);
    None: `DEFAULT_EXTERNAL_CONCURRENCY` for a `base_url`, one for a `client` alone. A hosted
    `server` keeps its slot count.
    With a `server` (or a `model_path`), the context size, the GGUF's chat template (does it take a
    later system message?) and the model's tokenizer are used (`exact_token_counts=None` means: exact whenever
    the model file is known; the length heuristic under-counts JSON by a third, which overflows small contexts).
    `headers` go with every request to `base_url` (a provider's own).
    Stores: `stores` as given, else file stores under `data_dir`, else session-only stores. Close the client
    with `await orchestrator.client.aclose()`.
    `gate`: asked before every model request (the hosted engine's watchdog: turns fail fast while it restarts).
    `choices`: `TurnSettings` fields (turns/settings.py) over the model's defaults (`turn_settings`): `tool_mode`
    and `max_calls_per_round` (the model profile of the server kind), `memory_design`, `prewarm` (None: on for a
    hosted `server`; off for a server we do not run: we cannot know that it keeps a prefix, and each prewarm is one
    more request to it), `background_compaction` (default True: a conversation's next fold is made after the reply,
    off the player's path; False folds in the turn that reaches the trigger), `default_timeout`, ...
    """
    direct = server is not None and base_url is None
    if server is not None:
        model_path = model_path or server.config.model_path
        model = model or server.config.alias
        if base_url is not None:
            api_key = api_key or server.api_key  # the public port demands its key
        if model_context_tokens is None and server.config.n_ctx:
            model_context_tokens = server.config.n_ctx
    elif not base_url and client is None:
        raise ValueError("build_orchestrator needs a server, a base_url or a client")
    if client is not None and gate is not None:
        raise ValueError("a given client keeps its own gate (pass it to the client)")
    settings = turn_settings(hosted=server is not None, model_path=model_path,
                             model_context_tokens=model_context_tokens, **choices)
    if exact_token_counts is None:
        exact_token_counts = model_path is not None
    if token_counter is None and exact_token_counts and model_path is not None:
        from pyruntime.history import LlamaTokenCounter

        token_counter = LlamaTokenCounter(model_path)
    if stores is None:
        persistent = data_dir is not None
        mode = AgentMemoryPersistenceMode.PERSISTENT if persistent else AgentMemoryPersistenceMode.SESSION_ONLY
        stores = open_stores(mode, data_dir)
    if concurrency is not None and concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if server is not None:
        capacity = server.config.slots
    elif concurrency is not None:
        capacity = concurrency
    else:  # an in-process double without a server runs one call at a time, as a one-slot engine
        capacity = DEFAULT_EXTERNAL_CONCURRENCY if client is None else 1
    if direct:
        assert server is not None
        client = client or OpenAICompatClient(**server.client_options(), gate=gate)
    elif client is None:
        assert base_url is not None
        client = OpenAICompatClient(base_url, api_key=api_key, model=model, headers=headers, gate=gate,
                                    connections=capacity)
    queue = ModelRequestQueue(capacity=capacity)
    return AiOrchestrator(policy or AgentMemoryPolicy(), stores, client, queue, tools=tools,
                          token_counter=token_counter, settings=settings,
                          prompt_cache_status=server.status if server is not None else None)


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
