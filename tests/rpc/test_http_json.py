"""The Connect transport exactly as the Unity client uses it: HTTP/1.1, proto3 JSON, bearer token (httpx)."""

from __future__ import annotations

import json
import struct

import httpx
import pytest

from tests.rpc.conftest import Runtime, files_snapshot

TARGET = {"roleId": "BlacksmithNPC", "scope": {"userId": "player-1", "sessionId": "save-3"}, "actor": "smith-2"}


def post(runtime: Runtime, procedure: str, body: object, *, token: str | None = None,
         headers: dict[str, str] | None = None, content: bytes | None = None) -> httpx.Response:
    """POST /<procedure> with a JSON body, the way Unity's HttpClient sends it."""
    sent = {"Content-Type": "application/json", "Authorization": f"Bearer {token or runtime.token}", **(headers or {})}
    payload = content if content is not None else json.dumps(body).encode()
    return httpx.post(f"{runtime.handle.connect_url}/{procedure}", content=payload, headers=sent, timeout=30)


def test_unity_style_memory_calls(runtime: Runtime) -> None:
    applied = post(runtime, "coreai.v1.MemoryStore/ApplyMemoryTool",
                   {"target": TARGET, "action": "append", "content": "Player bought a sword"})
    assert applied.status_code == 200 and applied.headers["content-type"] == "application/json"
    result = applied.json()
    assert result["success"] is True and result["version"] == 1 and result["memory"] == "Player bought a sword"
    assert json.loads(result["resultJson"])["Message"].startswith("DONE:")

    loaded = post(runtime, "coreai.v1.MemoryStore/LoadState", {"target": TARGET}).json()
    assert loaded["status"] == "LOAD_STATUS_LOADED" and loaded["state"]["memory"] == "Player bought a sword"
    assert loaded["state"]["versions"][0]["timestamp"].isdigit()  # int64 travels as a string in proto3 JSON

    post(runtime, "coreai.v1.MemoryStore/AppendChatMessage",
         {"target": TARGET, "role": "user", "content": "hello", "persist": True}).raise_for_status()
    history = post(runtime, "coreai.v1.MemoryStore/GetChatHistory", {"target": TARGET}).json()
    assert [m["content"] for m in history["messages"]] == ["hello"]

    refused = post(runtime, "coreai.v1.MemoryStore/ApplyMemoryTool",
                   {"target": TARGET, "argumentsJson": '{"action":"delete","old_text":"axe"}'})
    assert refused.status_code == 200 and refused.json()["success"] is False  # a refused edit is a result
    assert "old_text was not found" in refused.json()["error"]

    roles = post(runtime, "coreai.v1.Orchestrator/ListRoles", {}).json()
    assert "Creator" in [r["roleId"] for r in roles["roles"]]


def test_healthz_and_health_rpc_need_no_token(runtime: Runtime) -> None:
    health = httpx.get(f"{runtime.handle.connect_url}/healthz", timeout=10)
    assert health.status_code == 200 and health.json()["ready"] is True
    rpc = httpx.post(f"{runtime.handle.connect_url}/coreai.v1.Orchestrator/Health", content=b"{}",
                     headers={"Content-Type": "application/json"}, timeout=10)
    assert rpc.status_code == 200 and rpc.json()["ready"] is True


@pytest.mark.parametrize("token", [None, "Bearer wrong-token-0123456789", "Basic dXNlcjpwYXNz", "test-token"])
def test_missing_or_wrong_token_is_401_unauthenticated(runtime: Runtime, token: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = token
    response = httpx.post(f"{runtime.handle.connect_url}/coreai.v1.MemoryStore/SaveSummary",
                          content=json.dumps({"target": TARGET, "summary": "x"}), headers=headers, timeout=10)
    assert response.status_code == 401 and response.json()["code"] == "unauthenticated"
    assert files_snapshot(runtime.data_dir) == {}


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example:80"},
    {"Host": "attacker.test"},  # DNS rebinding: the name resolves to 127.0.0.1, the Host header says otherwise
    {"Host": "127.0.0.1:1"},  # loopback, but not our port
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
])
def test_foreign_host_or_origin_is_refused(runtime: Runtime, headers: dict[str, str]) -> None:
    # Even with the right token: a page must not reach the runtime at all.
    response = post(runtime, "coreai.v1.MemoryStore/SaveSummary", {"target": TARGET, "summary": "x"}, headers=headers)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    health = httpx.get(f"{runtime.handle.connect_url}/healthz", headers=headers, timeout=10)
    assert health.status_code == 403
    assert files_snapshot(runtime.data_dir) == {}


@pytest.mark.parametrize(("header", "value", "status"), [
    ("Host", "[", 400),
    ("Host", "http://[", 400),
    ("Host", "[127.0.0.1]:{port}", 400),  # an IPv4 address in brackets
    ("Host", "127.0.0.1:port", 400),
    ("Origin", "http://[", 400),
    ("Origin", "http://[127.0.0.1]:{port}", 400),
    ("Origin", "http://127.0.0.1:99999", 400),
    ("Origin", "[", 403),  # parses as a path, not an origin: foreign
    ("Origin", "[127.0.0.1]:{port}", 403),
])
@pytest.mark.parametrize("path", ["coreai.v1.MemoryStore/SaveSummary", "healthz"])
def test_malformed_host_or_origin_is_refused_clearly_never_a_500(runtime: Runtime, header: str, value: str,
                                                                  status: int, path: str) -> None:
    response = post(runtime, path, {"target": TARGET, "summary": "x"},
                    headers={header: value.format(port=runtime.handle.connect_port)})
    assert response.status_code == status, response.text
    if status == 400:
        assert response.json() == {"code": "invalid_argument", "message": f"malformed {header} header"}
    else:
        assert response.json()["code"] == "permission_denied"
    assert files_snapshot(runtime.data_dir) == {}


def test_loopback_origin_and_host_names_are_accepted(runtime: Runtime) -> None:
    port = runtime.handle.connect_port
    for headers in ({"Host": f"localhost:{port}"}, {"Origin": f"http://127.0.0.1:{port}"},
                    {"Origin": "http://localhost:8080"}):
        assert post(runtime, "coreai.v1.Orchestrator/ListRoles", {}, headers=headers).status_code == 200


@pytest.mark.parametrize(("body", "fragment"), [
    (b"{not json", "unmarshal"),
    (b'{"target": {"roleId": 5}}', "unmarshal"),  # wrong JSON type
    (b'{"target": {"roleId": "T"}, "persist": "yes"}', "unmarshal"),
    (b'{"target": {"roleId": "T"}, "contnt": "typo"}', "contnt"),  # unknown fields are refused, never ignored
    (b'{"target": {"roleId": "T"}, "role": "user", "content": "x"}', None),  # a valid control request
    (b"[]", "must be a JSON object"),  # protobuf alone reads a JSON array as an empty message
    (b'{"target": [], "role": "user", "content": "x"}', "request.target must be a JSON object"),
    (b'{"target": {"roleId": ""}, "role": "user", "content": "x"}', "role_id is required"),
    (b'{"target": {"roleId": "Unknown Role"}, "role": "", "content": "x"}', "role is required"),
])
def test_bad_json_gets_invalid_argument_and_changes_nothing(runtime: Runtime, body: bytes,
                                                            fragment: str | None) -> None:
    response = post(runtime, "coreai.v1.MemoryStore/AppendChatMessage", None, content=body)
    if fragment is None:
        assert response.status_code == 200
        return
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "invalid_argument" and fragment in error["message"]
    assert files_snapshot(runtime.data_dir) == {}


def test_huge_body_is_resource_exhausted(runtime: Runtime) -> None:
    body = json.dumps({"target": TARGET, "summary": "z" * (4 * 1024 * 1024 + 10)}).encode()
    response = post(runtime, "coreai.v1.MemoryStore/SaveSummary", None, content=body)
    assert response.status_code == 429 and response.json()["code"] == "resource_exhausted"
    assert files_snapshot(runtime.data_dir) == {}


def test_unknown_procedure_and_wrong_content_type(runtime: Runtime) -> None:
    assert post(runtime, "coreai.v1.MemoryStore/DropEverything", {}).status_code == 404
    response = post(runtime, "coreai.v1.MemoryStore/LoadState", None, content=b"x",
                    headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


def read_envelopes(data: bytes) -> list[tuple[int, dict]]:
    """Connect stream frames: (flags, JSON message)."""
    frames = []
    while data:
        flags, length = struct.unpack(">BI", data[:5])
        frames.append((flags, json.loads(data[5:5 + length])))
        data = data[5 + length:]
    return frames


def test_raw_connect_server_stream_without_a_model_ends_with_an_error_message(runtime: Runtime) -> None:
    request = json.dumps({"target": TARGET, "hint": "hello"}).encode()
    envelope = struct.pack(">BI", 0, len(request)) + request
    response = httpx.post(f"{runtime.handle.connect_url}/coreai.v1.Orchestrator/StreamTask", content=envelope,
                          headers={"Content-Type": "application/connect+json",
                                   "Authorization": f"Bearer {runtime.token}"}, timeout=30)
    assert response.status_code == 200 and response.headers["content-type"] == "application/connect+json"
    frames = read_envelopes(response.content)
    assert len(frames) == 1 and frames[0][0] == 0x02  # only the end-of-stream message
    assert frames[0][1]["error"]["code"] == "unavailable"
