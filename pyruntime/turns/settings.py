"""`TurnSettings`: how the turn engine runs every turn, one frozen value built once and handed to each of its parts.

The orchestrator, the request planner, the tool rounds and the work between turns read their settings from this one
value, so a new setting is a field here (with its line of documentation) and nothing else in their signatures.
What is per role (memory, history, output caps, the role's own context) stays in the role's policy
(`pyruntime.policy.RoleMemoryConfig`), read by each turn; what suits a model server is resolved from it by
`turns/factory.py` (`turn_settings`), whose defaults the runtime's flags override (`RuntimeSettings.turn_choices`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyruntime.errors import InvalidArgumentError
from pyruntime.history import LlmCompactionOptions
from pyruntime.history.budget import COMPACTION_TARGET_RATIO
from pyruntime.turns.planning.prompt import assemble_messages
from pyruntime.turns.rounds.client_tools import DEFAULT_CLIENT_TOOL_TIMEOUT_S
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND, ToolCallMode
from pyruntime.turns.writer.decision import MemoryDesign

DEFAULT_TURN_TIMEOUT_S = 120.0
# Room for the JSON wrapper and tool calls on top of a role's visible output cap, when tools are
# offered: the cap bounds the reply the player sees, never the calls (a 32-48 token cap sent as
# max_tokens cut the JSON of most structured turns; docs/benchmarks.md#model-supervision).
TOOL_CALL_ALLOWANCE_TOKENS = 512
DEFAULT_MODEL_CONTEXT_TOKENS = 8192
DEFAULT_STREAM_BUFFER = 32

AssembleMessages = Callable[..., list[dict[str, Any]]]  # (*, system_prompt, **parts: `prompt.PromptParts`)


@dataclass(frozen=True)
class TurnSettings:
    """The turn engine's settings (the defaults are an orchestrator's without a model profile; see the module)."""

    # How tool calls travel: `structured` (a JSON reply under llama.cpp's schema grammar) or `native` (the
    # OpenAI `tools` protocol). A string is parsed (`ToolCallMode.parse`).
    tool_mode: ToolCallMode = ToolCallMode.STRUCTURED
    # Tool calls run per model round; the rest of a round's calls are dropped.
    max_calls_per_round: int = MAX_CALLS_PER_ROUND
    # How memory is written for roles with memory on: the `memory` tool in the reply, or a writer pass after it.
    memory_design: MemoryDesign = MemoryDesign.TOOL
    # The memory-last layout (planning/memory_last.py): the whole memory, consolidated every turn, right before the
    # player's line; the factory gives it to the writer design's (small) models.
    memory_last: bool = False
    # Where that block goes (between/block_pace.py): None - before each player line while the model keeps up with
    # the player, where it was first sent once a turn finds its prewarm still running; True or False - always the one
    # or the other (measured against each other in docs/benchmarks.md#the-memory-block-moves-stays-auto).
    memory_last_stays: bool | None = None
    # The model's context in tokens; a role's smaller `context_tokens` wins for that role.
    model_context_tokens: int = DEFAULT_MODEL_CONTEXT_TOKENS
    # Whether the model's chat template takes a system message after the first (else the tail goes in a user one).
    system_messages_after_first: bool = True
    # Seconds a turn may take when its request sets none.
    default_timeout: float = DEFAULT_TURN_TIMEOUT_S
    # False - a turn's timeout counts only while the turn is not waiting for the model's request queue, so a turn
    # never times out without reaching the model; True - it counts from the call. Either way a waiting turn can be
    # cancelled.
    timeout_includes_queue: bool = False
    # Tokens for the JSON wrapper and tool calls on top of the visible output cap, when tools are offered.
    tool_call_allowance: int = TOOL_CALL_ALLOWANCE_TOKENS
    # Seconds a game-tool call waits for the client's result when the request sets none.
    client_tool_timeout: float = DEFAULT_CLIENT_TOOL_TIMEOUT_S
    # Events a streamed turn runs ahead of its consumer before it waits (turns/streaming.py).
    stream_buffer: int = DEFAULT_STREAM_BUFFER
    # Whether roles that ask for it get the summary written by the model (else the deterministic fold only).
    llm_compaction_enabled: bool = False
    # The summarizer prompt and the limits of one compaction call.
    llm_compaction_options: LlmCompactionOptions = field(default_factory=LlmCompactionOptions)
    # The share of the history budget a fold leaves; 1.0: no hysteresis (a benchmark's design-note layout).
    compaction_target_ratio: float = COMPACTION_TARGET_RATIO
    # Fold between turns (turns/between/folds.py): after a reply the next turn's fold is made in the background
    # (and its head prewarmed, with `prewarm`) and sent by a later turn once ready; a turn never waits for it.
    background_compaction: bool = False
    # After each turn, evaluate the next turn's prefix in the background when it changes (turns/between/prewarm.py);
    # the factory turns it on for a model we host.
    prewarm: bool = False
    # How a request is laid out (a system prompt and `prompt.PromptParts`): a benchmark runs the design note's
    # layout against the runtime's with it (bench/design_note_layout.py). Memory-last uses its own.
    assemble: AssembleMessages = assemble_messages

    def __post_init__(self) -> None:
        """Parse the enumerations given as strings and refuse a value no turn could run with."""
        object.__setattr__(self, "tool_mode", ToolCallMode.parse(self.tool_mode))
        object.__setattr__(self, "memory_design", MemoryDesign.parse(self.memory_design))
        if self.model_context_tokens < 1:
            raise InvalidArgumentError("model_context_tokens must be positive")
        if self.default_timeout <= 0 or self.client_tool_timeout <= 0:
            raise InvalidArgumentError("default_timeout and client_tool_timeout must be positive")
        if self.max_calls_per_round < 1 or self.stream_buffer < 1:
            raise InvalidArgumentError("max_calls_per_round and stream_buffer must be positive")
        if self.tool_call_allowance < 0:
            raise InvalidArgumentError("tool_call_allowance must be >= 0")

    def but(self, **changes: Any) -> TurnSettings:
        """These settings with `changes` (field names; a name that is no setting is a TypeError)."""
        return dataclasses.replace(self, **changes) if changes else self
