"""Health and /metrics report the hosted model server's memory and slots: its RSS, the host
prompt cache's use and budget, the slots busy and idle, read from the real tiny llama-server (RSS from /proc, the
cache from llama-server's log, the slots from the watchdog's probe)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.app import RuntimeModel
from pyruntime.client import RuntimeHealth
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.model.hosting.supervisor import ModelSupervisor, WatchdogSettings
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service.model_memory import process_rss_bytes
from pyruntime.turns import ToolCallMode
from tests.rpc.conftest import TRANSPORTS, Runtime, start_runtime
from tests.support.fixtures import free_port
from tests.support.tiny_model import TINY_MODEL_ALIAS

CACHE_MB = 8
SCOPE = AgentMemoryScope(user_id="player-1")
LINUX = sys.platform.startswith("linux")


@dataclass
class Hosted:
    runtime: Runtime
    supervisor: ModelSupervisor


@pytest.fixture(scope="module")
def hosted(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    # One slot: each NPC's turn moves the other's state into the host prompt cache (with more slots each NPC
    # keeps its own, and the cache stays empty).
    server = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias=TINY_MODEL_ALIAS,
                                                  port=free_port(), n_threads=1, prompt_cache_mb=CACHE_MB, slots=1))
    supervisor = ModelSupervisor(server, WatchdogSettings(interval_s=0.1))
    supervisor.start()
    # Health's memory figures come from the watchdog, as in serve: the runtime reads them from the model it is given.
    model = RuntimeModel(server.base_url, TINY_MODEL_ALIAS, server, supervisor)
    runtime = start_runtime(tmp_path_factory.mktemp("memory") / "data", model=model, session_only=True,
                            tool_mode=ToolCallMode.NATIVE)
    try:
        yield Hosted(runtime, supervisor)
    finally:
        runtime.handle.stop(1.0)
        supervisor.close()


def _idle_health(client) -> RuntimeHealth:
    """Health once the slot is free: the previous test's last turn may still have its prewarm on the model."""
    deadline = time.monotonic() + 60
    while True:
        health = client.health()
        if health.model_slots_busy == 0 or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


def _cache_used_after(hosted: Hosted, transport: str, above: int) -> RuntimeHealth:
    """Health once the watchdog's probe has seen the cache hold more than `above` bytes (bounded wait)."""
    deadline = time.monotonic() + 60
    with hosted.runtime.client(transport) as client:
        while True:
            health = client.health()
            if health.prompt_cache_used_bytes > above or time.monotonic() > deadline:
                return health
            time.sleep(0.05)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_health_reports_the_model_servers_memory_and_the_cache_growing(hosted: Hosted, transport: str) -> None:
    with hosted.runtime.client(transport) as client:
        before = _idle_health(client)
        assert before.model_ready and before.prompt_cache_limit_bytes == CACHE_MB << 20
        if LINUX:
            assert before.model_rss_bytes > 10 << 20  # a loaded llama.cpp with Python: tens of MB at least
        assert before.model_state == "ready" and before.model_slots == 1 and before.model_slots_busy == 0
        used = before.prompt_cache_used_bytes
        for npc in ("Bram", "Elda", "Tomas"):  # the slot's previous NPC goes to the cache at each turn
            role = f"{npc}{transport}"
            client.configure_role(RoleMemoryConfig(role, use_memory_tool=False, max_output_tokens=4,
                                                   temperature=0.0, system_prompt=f"You are {npc} ({transport})."))
            assert client.run_task("hello", role_id=role, scope=SCOPE).status == pb.TURN_STATUS_OK
            if npc == "Bram" and used == 0:
                continue  # the first NPC of the run only fills the slot
            health = _cache_used_after(hosted, transport, used)
            assert used < health.prompt_cache_used_bytes <= health.prompt_cache_limit_bytes
            assert health.prompt_cache_entries >= 1
            used = health.prompt_cache_used_bytes


def test_metrics_carry_the_same_gauges(hosted: Hosted) -> None:
    with hosted.runtime.client("grpc") as client:
        _idle_health(client)
    text = httpx.get(f"{hosted.runtime.handle.connect_url}/metrics", timeout=10).text
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["coreai_prompt_cache_limit_bytes"] == CACHE_MB << 20
    if LINUX:
        assert samples["coreai_model_rss_bytes"] > 10 << 20
    with hosted.runtime.client("grpc") as client:
        health = client.health()
    assert samples["coreai_prompt_cache_used_bytes"] <= health.prompt_cache_used_bytes  # it only grew since
    slots = {s.labels["state"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == "coreai_model_slots"}
    assert slots == {"busy": 0.0, "idle": 1.0}


def test_a_runtime_without_a_hosted_model_reports_zeros(tmp_path: Path) -> None:
    runtime = start_runtime(tmp_path / "data")
    try:
        with runtime.client("connect") as client:
            health = client.health()
    finally:
        runtime.handle.stop(1.0)
    assert (health.model_rss_bytes, health.prompt_cache_used_bytes, health.prompt_cache_limit_bytes) == (0, 0, 0)


def test_rss_is_read_from_proc_status(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text("Name:\tpython\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nThreads:\t3\n")
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "status").write_text("Name:\tzombie\n")  # a zombie has no VmRSS line
    assert process_rss_bytes(42, tmp_path) == 123456 * 1024
    assert process_rss_bytes(7, tmp_path) == 0 and process_rss_bytes(99, tmp_path) == 0
    assert process_rss_bytes(None, tmp_path) == 0
