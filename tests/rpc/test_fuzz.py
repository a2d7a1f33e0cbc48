"""Fuzzing the wire: whatever a client sends, the answer is a precise status, never INTERNAL/UNKNOWN or a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coreai.v1 import memory_store_pb2, orchestrator_pb2
from tests.rpc.conftest import Runtime, start_runtime

SERVICES = (memory_store_pb2.DESCRIPTOR.services_by_name["MemoryStore"],
            orchestrator_pb2.DESCRIPTOR.services_by_name["Orchestrator"])
PROCEDURES = [f"{s.full_name}/{m.name}" for s in SERVICES for m in s.methods]
FIELD_NAMES = ["target", "roleId", "role_id", "scope", "userId", "tenantId", "actor", "action", "content", "oldText",
               "newText", "anchor", "line", "replaceAll", "argumentsJson", "version", "fromVersion", "toVersion",
               "role", "persist", "maxMessages", "maxEntries", "summary", "snapshot", "roles", "roleIds", "actors",
               "state", "memory", "versions", "formatVersion", "history", "kind", "hint", "timeoutMs", "config",
               "allowedToolNames", "names", "maxMemoryChars", "temperature", "targetScope"]
BAD_STATUS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40)
           | st.sampled_from(["read", "write", "append", "str_replace", "TRANSCRIPT_KIND_USER", "1e999", "Creator",
                              "", " ", "\x00", "NaN", "-1", "9999999999999999999999"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), inner, max_size=5),
                           max_leaves=25)
request_objects = st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=6)


@pytest.fixture(scope="module")
def fuzz_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = start_runtime(tmp_path_factory.mktemp("fuzz") / "data")
    yield rt
    rt.handle.stop(1.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(procedure=st.sampled_from(PROCEDURES), body=request_objects | json_values)
def test_json_fuzz_never_yields_internal(fuzz_runtime: Runtime, procedure: str, body: object) -> None:
    try:
        payload = json.dumps(body, allow_nan=True).encode()
    except (ValueError, OverflowError):
        payload = b"{"
    response = httpx.post(f"{fuzz_runtime.handle.connect_url}/{procedure}", content=payload, timeout=30,
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"Bearer {fuzz_runtime.token}"})
    if response.status_code == 415:
        assert procedure.endswith("StreamTask")  # a stream needs application/connect+json
        return
    assert response.status_code < 500 or response.json()["code"] == "unavailable", response.text
    if response.status_code != 200:
        error = response.json()
        assert error["code"] not in ("internal", "unknown") and error["message"], error
        assert "Traceback" not in error["message"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), procedure=st.sampled_from(PROCEDURES))
def test_proto_fuzz_over_grpc_never_yields_internal(fuzz_runtime: Runtime, data: st.DataObject,
                                                    procedure: str) -> None:
    service_name, method_name = procedure.split("/")
    method = next(s for s in SERVICES if s.full_name == service_name).methods_by_name[method_name]
    garbage = data.draw(st.booleans())
    if garbage:
        body = data.draw(st.binary(max_size=64))
    else:
        # A well-formed message of the right type with random field values.
        body = json_message(GetMessageClass(method.input_type), data)
    with grpc.insecure_channel(f"127.0.0.1:{fuzz_runtime.handle.grpc_port}") as channel:
        call = (channel.unary_stream if method.server_streaming else channel.unary_unary)(f"/{procedure}")
        try:
            result = call(body, metadata=(("authorization", f"Bearer {fuzz_runtime.token}"),), timeout=30)
            if method.server_streaming:
                list(result)
        except grpc.RpcError as exc:
            assert exc.code() not in BAD_STATUS, exc.details()
            assert exc.details()


def json_message(message_class: type, data: st.DataObject) -> bytes:
    """A serialized message whose scalar fields (nested too) hold drawn values."""
    message = message_class()
    fill(message, data, depth=0)
    return message.SerializeToString()


def fill(message: object, data: st.DataObject, depth: int) -> None:
    from google.protobuf.descriptor import FieldDescriptor as F

    for field in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
        if not data.draw(st.booleans()):
            continue
        if field.type == F.TYPE_MESSAGE:
            if depth >= 3:
                continue
            target = getattr(message, field.name).add() if field.is_repeated else getattr(
                message, field.name)
            fill(target, data, depth + 1)
            if not field.is_repeated:
                target.SetInParent()
            continue
        value = data.draw(_SCALARS[field.type])
        if field.is_repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)


def _scalar_strategies() -> dict[int, st.SearchStrategy]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_STRING: st.text(max_size=30) | st.sampled_from(["read", "append", "Creator", " ", "x" * 300]),
        F.TYPE_INT32: st.integers(-2**31, 2**31 - 1), F.TYPE_INT64: st.integers(-2**63, 2**63 - 1),
        F.TYPE_BOOL: st.booleans(), F.TYPE_DOUBLE: st.floats(allow_nan=True), F.TYPE_ENUM: st.integers(-3, 12),
    }


_SCALARS = _scalar_strategies()


def test_fuzz_runtime_still_serves_after_fuzzing(fuzz_runtime: Runtime, tmp_path: Path) -> None:
    with fuzz_runtime.client("connect") as client:
        assert client.apply_memory_tool("AfterFuzz", {"action": "append", "content": "ok"}).success
