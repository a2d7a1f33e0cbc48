"""A model that answers with ~1000-deep JSON in its memory call: the turn goes on, the model sees a tool error.

No real model can be made to emit this on purpose, so (as the standards allow for a failure that cannot
be provoked otherwise) a stub OpenAI-compatible server on loopback streams that reply; the client, the
turn, the tool loop and the stores are the real ones. Before the fix `json.loads` raised RecursionError
while the reply was assembled and the whole turn failed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiOrchestrator, AiTaskRequest, ToolRegistry

DEEP_ARGUMENTS = '{"action": "append", "content": ' + "[" * 1000 + "]" * 1000 + "}"


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "stub", "object": "chat.completion.chunk", "created": 0, "model": "stub",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class _StubModel(BaseHTTPRequestHandler):
    """First request: a memory call with deep arguments; every later one: a plain reply."""

    requests: list[dict] = []

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        payload = json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if len(type(self).requests) == 1:
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "memory", "arguments": DEEP_ARGUMENTS}}
            chunks = [_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls")]
        else:
            chunks = [_chunk({"role": "assistant", "content": "Noted."}), _chunk({}, "stop")]
        payload = b"".join(chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def stub_url() -> Iterator[str]:
    _StubModel.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_deep_memory_call_from_the_model_is_a_tool_error_and_the_turn_completes(stub_url: str, tmp_path) -> None:
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    policy = AgentMemoryPolicy()
    policy.set(RoleMemoryConfig("Keeper"))
    orchestrator = AiOrchestrator(policy, stores, OpenAICompatClient(stub_url), ModelRequestQueue(),
                                  tools=ToolRegistry(), model_context_tokens=2048, tool_mode="native")
    result = asyncio.run(orchestrator.run_task(AiTaskRequest("remember this", "Keeper")))
    assert result.text == "Noted."
    second = _StubModel.requests[1]["messages"]
    tool_results = [m for m in second if m.get("role") == "tool"]
    assert tool_results and "deeper than 64 levels" in tool_results[-1]["content"]
    assert json.loads(tool_results[-1]["content"])["Success"] is False
    assert stores.scoped().try_load("Keeper").state is None  # nothing written
