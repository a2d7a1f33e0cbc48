"""What a turn offers the model (contract §7): its system prompt and tools, the same in every request of the turn.

`offer_turn` is pure: from the turn (`TurnInput`), the engine's settings and the tools the role has (the `memory`
tool, the registered ones, the client's game tools) it returns the `TurnOffer` the planner and the tool rounds read:
which tools are offered now (the request's allowed names and forcing mode), the system prompt with the tool
contract, the availability block, the native schemas, and the room for tool calls above the visible cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyruntime.memory import MEMORY_TOOL_NAME, MemoryTool
from pyruntime.turns.planning.context import native_tools
from pyruntime.turns.planning.prompt import build_system_prompt, role_system_prompt
from pyruntime.turns.request import FORCED_TOOL_NONE, forced_tool, tool_availability
from pyruntime.turns.rounds.modes import ToolCallMode, tool_contract
from pyruntime.turns.rounds.registry import RegisteredTool
from pyruntime.turns.rounds.rules import MemoryToolAdapter, OfferedTool, offered_tools
from pyruntime.turns.settings import TurnSettings
from pyruntime.turns.turn import TurnInput, TurnOffer
from pyruntime.turns.writer.decision import MemoryDesign


def memory_tool_of(turn: TurnInput, settings: TurnSettings) -> MemoryToolAdapter | None:
    """The `memory` tool of a turn whose role has memory on; None when the writer pass after the reply keeps it
    (turns/writer/passes.py), unless the request forces the tool."""
    request, config = turn.request, turn.config
    if not config.use_memory_tool:
        return None
    forced_memory = request.forced_tool_mode.strip().lower() == MEMORY_TOOL_NAME
    if settings.memory_design is MemoryDesign.WRITER and not forced_memory:
        return None
    tool = MemoryTool(turn.store.store, turn.key, max_memory_chars=config.effective_max_memory_chars)
    return MemoryToolAdapter(tool, config.default_action, player_text=request.hint)


def offer_turn(turn: TurnInput, settings: TurnSettings, registered: Sequence[RegisteredTool],
               client: Sequence[OfferedTool] = ()) -> TurnOffer:
    """The `TurnOffer` of `turn`: see the module docstring."""
    request = turn.request
    allowed = request.allowed_tool_names
    if request.forced_tool_mode.lower() == FORCED_TOOL_NONE:
        allowed = ()
    role_tools, offered = offered_tools(memory_tool_of(turn, settings), registered, allowed, client)
    forced = forced_tool(request.forced_tool_mode, offered)
    system_prompt = build_system_prompt(
        role_system_prompt(request.role_id, turn.config.system_prompt),
        tool_contract([t.definition() for t in role_tools], turn.mode),
    )
    offered_defs = tuple(t.definition() for t in offered)
    return TurnOffer(
        system_prompt=system_prompt,
        availability=tool_availability(offered, forced) if allowed is not None or forced else "",
        tools_sent=native_tools(offered_defs, turn.mode is ToolCallMode.NATIVE),
        tool_allowance=settings.tool_call_allowance if offered else 0,
        offered=tuple(offered),
        offered_defs=offered_defs,
        forced=forced,
    )
