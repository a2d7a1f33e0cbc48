"""The tool output both sides share (`pyruntime.tool_output`), as the client's game tools use it."""

from __future__ import annotations

from pydantic import BaseModel

from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client import ClientTool, ToolOutput
from pyruntime.client._tools import result_request
from pyruntime.turns.rounds import registry as turn_tools

CALL = orch.ClientToolCall(turn_id="t1", call_id="c1", name="quote_price", arguments_json='{"item": "sword"}')


class Quote(BaseModel):
    """Arguments of quote_price."""

    item: str
    count: int | None = None


def test_a_handler_result_becomes_the_submitted_result() -> None:
    assert (result_request(CALL, ToolOutput(False, "no such item")).success,
            result_request(CALL, ToolOutput(False, "no such item")).content) == (False, "no such item")
    assert result_request(CALL, {"gold": 12}).content == '{"gold": 12}'
    assert result_request(CALL, None).content == "DONE"


def test_the_runtime_side_tool_output_is_the_same_result() -> None:
    # A game that returns the ToolOutput runtime-hosted tools use gets the same result, not its repr.
    submitted = result_request(CALL, turn_tools.ToolOutput(False, "out of stock"))
    assert (submitted.success, submitted.content) == (False, "out of stock")


def test_a_model_schema_is_the_one_runtime_hosted_tools_show() -> None:
    hosted = turn_tools.RegisteredTool("quote_price", "Price.", Quote, lambda args: None, False)
    tool = ClientTool.from_model("quote_price", "Price.", Quote, lambda quote: {"gold": len(quote.item)})
    assert dict(tool.parameters) == hosted.definition()["function"]["parameters"]
    assert tool.handler({"item": "sword"}) == {"gold": 5}
