"""Health that never blocks and means something: readiness (503 with the reason) while the real tiny model loads,
hangs and is restarted by the real watchdog; liveness always; the standard grpc.health.v1 service and reflection
without a token; none of them touches the model (a frozen model server must not freeze health).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from prometheus_client.parser import text_string_to_metric_families

from pyruntime.app import RuntimeModel
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.model.hosting.supervisor import ModelSupervisor, WatchdogSettings
from tests.rpc.conftest import Runtime, start_runtime
from tests.support.fixtures import free_port
from tests.support.tiny_model import TINY_MODEL_ALIAS

ANSWER_WITHIN_S = 5.0  # a hang guard for each probe, not a speed target
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class Supervised:
    """A runtime whose readiness is a real watchdog over a real (not yet started) tiny llama.cpp server."""

    runtime: Runtime
    supervisor: ModelSupervisor
    server: LlamaServerProcess

    def healthz(self) -> httpx.Response:
        return httpx.get(f"{self.runtime.handle.connect_url}/healthz", timeout=ANSWER_WITHIN_S)

    def grpc_health(self, service: str = "") -> int:
        with grpc.insecure_channel(self.runtime.handle.grpc_target) as channel:
            stub: Any = health_pb2_grpc.HealthStub(channel)  # types-grpcio's HealthStub declares no methods
            return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=ANSWER_WITHIN_S).status

    def wait_for(self, status: int, service: str = "") -> None:
        deadline = time.monotonic() + 60
        while self.grpc_health(service) != status:
            assert time.monotonic() < deadline, f"grpc.health.v1 never became {status}"
            time.sleep(0.05)


@pytest.fixture
def supervised(tiny_model_path: Path, tmp_path: Path) -> Iterator[Supervised]:
    server = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias=TINY_MODEL_ALIAS,
                                                  port=free_port(), n_threads=1))
    supervisor = ModelSupervisor(server, WatchdogSettings(interval_s=0.2, probe_timeout_s=0.5, failed_probes=2))
    # The watchdog is started by the test (the runtime's Health reads it from the start, as serve's does).
    model = RuntimeModel(server.base_url, TINY_MODEL_ALIAS, server, supervisor)
    runtime = start_runtime(tmp_path, model=model, session_only=True)
    try:
        yield Supervised(runtime, supervisor, server)
    finally:
        runtime.handle.stop(1.0)
        supervisor.close()


def test_not_ready_while_the_model_loads_then_ready(supervised: Supervised) -> None:
    loading = supervised.healthz()
    assert loading.status_code == 503
    body = loading.json()
    assert body["ready"] is False and body["live"] is True and body["modelState"] == "loading" and body["reason"]
    live = httpx.get(f"{supervised.runtime.handle.connect_url}/livez", timeout=ANSWER_WITHIN_S)
    assert live.status_code == 200 and live.json() == {"live": True}
    with supervised.runtime.client("grpc") as client:
        health = client.health()
        assert not health.ready and not health.model_ready
    supervised.wait_for(NOT_SERVING)
    assert supervised.grpc_health("coreai.v1.Orchestrator") == NOT_SERVING
    assert supervised.grpc_health("coreai.v1.MemoryStore") == SERVING  # saves work without the model

    supervised.supervisor.start()  # loads the model, then watches it

    ready = supervised.healthz()
    assert ready.status_code == 200 and ready.json()["modelState"] == "ready" and ready.json()["reason"] == ""
    with supervised.runtime.client("connect") as client:
        health = client.health()
        assert health.ready and health.model_ready and health.model == TINY_MODEL_ALIAS
    supervised.wait_for(SERVING)
    assert supervised.grpc_health("coreai.v1.Orchestrator") == SERVING


def test_a_frozen_model_server_does_not_freeze_health_and_its_restart_shows(
        supervised: Supervised, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    supervised.supervisor.start()
    assert supervised.healthz().status_code == 200
    # The restart loads for 2 s more (a script in front of the real binary): the tiny model alone reloads
    # faster than one probe round below on a busy machine, and "restarting" would never be seen.
    from tests.model.test_serve_cli import slow_engine

    for name, value in slow_engine(tmp_path, 2).items():
        monkeypatch.setenv(name, value)
    seen: list[tuple[int, str]] = []
    assert supervised.server.pid is not None
    os.kill(supervised.server.pid, signal.SIGSTOP)  # a hung llama.cpp: it answers nothing any more
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = supervised.healthz()  # raises if health ever blocks for ANSWER_WITHIN_S
        seen.append((response.status_code, response.json()["modelState"]))
        with supervised.runtime.client("grpc") as client:
            client.health()
        if supervised.supervisor.restarts and response.status_code == 200:
            break
        time.sleep(0.05)
    restarting = [s for s in seen if s[1] == "restarting"]
    assert restarting and all(code == 503 for code, _ in restarting), seen
    assert seen[-1] == (200, "ready"), seen
    metrics = httpx.get(f"{supervised.runtime.handle.connect_url}/metrics", timeout=ANSWER_WITHIN_S).text
    samples = {s.name: s for f in text_string_to_metric_families(metrics) for s in f.samples}
    assert samples["coreai_model_restarts_total"].value == 1
    assert samples["coreai_model_ready"].value == 1


def test_standard_health_and_reflection_answer_without_a_token(tmp_path: Path) -> None:
    runtime = start_runtime(tmp_path / "data")  # no model: stores only, ready
    try:
        with grpc.insecure_channel(runtime.handle.grpc_target) as channel:
            stub: Any = health_pb2_grpc.HealthStub(channel)  # types-grpcio's HealthStub declares no methods
            for service in ("", "coreai.v1.MemoryStore", "coreai.v1.Orchestrator"):
                assert stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status == SERVING
            with pytest.raises(grpc.RpcError) as unknown:
                stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
            assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
            services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
            assert {"coreai.v1.MemoryStore", "coreai.v1.Orchestrator", "grpc.health.v1.Health"} <= services
            method = ProtoReflectionDescriptorDatabase(channel).FindFileContainingSymbol("coreai.v1.MemoryStore")
            assert method.name.endswith(".proto")
    finally:
        runtime.handle.stop(1.0)


def test_health_watch_streams_the_change_to_not_serving_at_shutdown(tmp_path: Path) -> None:
    runtime = start_runtime(tmp_path / "data")
    statuses: list[int] = []
    first = threading.Event()

    def watch() -> None:
        with grpc.insecure_channel(runtime.handle.grpc_target) as channel:
            stub: Any = health_pb2_grpc.HealthStub(channel)  # types-grpcio's HealthStub declares no methods
            try:
                for reply in stub.Watch(health_pb2.HealthCheckRequest(), timeout=30):
                    statuses.append(reply.status)
                    first.set()
            except grpc.RpcError:
                pass  # the server went away after saying NOT_SERVING

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert first.wait(30)
    runtime.handle.stop(2.0)
    watcher.join(30)
    assert statuses[0] == SERVING and NOT_SERVING in statuses
