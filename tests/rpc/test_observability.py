"""What an operator sees: JSON log lines that carry the turn's trace id (and never the player's text), and
`/metrics` in the Prometheus text format with turns by status, turns in flight, connections and the model state.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeClient, RuntimeUnavailableError
from pyruntime.observability import loggable_trace_id
from pyruntime.observability.metrics import RuntimeMetrics
from pyruntime.scopes import AgentMemoryScope
from pyruntime.turns.between.prewarm import PrewarmStats
from tests.rpc.conftest import TOKEN, Runtime, spawn_runtime
from tests.support.fixtures import free_port

SECRET_HINT = "my-secret-sword-name-zyxwv"
PLAYER = "player-id-qwerty-42"


def test_json_logs_carry_the_trace_id_on_every_line_of_a_turn_and_no_player_data(tmp_path: Path,
                                                                                tiny_model_path: Path) -> None:
    log = tmp_path / "runtime.log"
    runtime = spawn_runtime(tmp_path / "data", log=log,
                            model=("--model", str(tiny_model_path), "--port", str(free_port())),
                            extra=("--log-format", "json", "--log-level", "debug"))
    try:
        with RuntimeClient(f"grpc://127.0.0.1:{runtime.grpc_port}", token=TOKEN, timeout=120) as client:
            traced = client.run_task(SECRET_HINT, role_id="SmartChat", scope=AgentMemoryScope(user_id=PLAYER),
                                     trace_id="trace-42", max_output_tokens=8)
            assert traced.trace_id == "trace-42"
        with RuntimeClient(f"http://127.0.0.1:{runtime.connect_port}", token=TOKEN, timeout=120) as client:
            untraced = client.run_task("hello", role_id="PlainChat", max_output_tokens=4, forced_tool_mode="none")
            assert untraced.status == pb.TURN_STATUS_OK and untraced.trace_id  # the runtime gave it one
    finally:
        assert runtime.terminate(signal.SIGTERM) == 0
    text = log.read_text()
    entries = [json.loads(line) for line in text.splitlines()]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= entry.keys() for entry in entries)
    ended = [e for e in entries if e["msg"].startswith("turn ended")]
    assert [e.get("trace_id") for e in ended] == ["trace-42", untraced.trace_id]
    # Every line the turn engine, history, memory or save locks logged while the turns ran names its turn.
    first = next(i for i, e in enumerate(entries) if e.get("trace_id"))
    last = next(i for i, e in enumerate(entries) if e["msg"] == "stopping")
    during = [e for e in entries[first:last]
              if e["logger"].startswith(("pyruntime.turns", "pyruntime.history", "pyruntime.memory", "filelock"))]
    assert len(during) > len(ended)
    assert all(e.get("trace_id") in ("trace-42", untraced.trace_id) for e in during), during
    for secret in (SECRET_HINT, PLAYER, "SmartChat"):
        assert secret not in text


def test_metrics_parse_and_count_turns_connections_and_model_state(runtime: Runtime) -> None:
    with runtime.client("grpc") as client:
        try:
            client.run_task("hi")  # no model in this runtime: UNAVAILABLE, counted as such
        except RuntimeUnavailableError:
            pass
        with httpx.Client(base_url=runtime.handle.connect_url, timeout=10) as http:
            response = http.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("coreai_turns_total", (("status", "unavailable"),))] == 1
    assert samples[("coreai_turns_in_flight", ())] == 0
    assert samples[("coreai_open_connections", (("transport", "connect"),))] >= 1  # this scrape's own
    assert samples[("coreai_open_connections", (("transport", "grpc"),))] >= 1  # the client's channel
    assert samples[("coreai_model_state", (("state", "none"),))] == 1
    assert samples[("coreai_model_restarts_total", ())] == 0
    for name in ("coreai_turn_prompt_tokens", "coreai_turn_completion_tokens", "coreai_connections_closed",
                 "coreai_accept_errors", "coreai_model_queue_waiting", "coreai_model_ready"):
        assert name in families
    assert samples[("coreai_prewarms_total", (("outcome", "sent"),))] == 0  # no model, no orchestrator to watch


def test_metrics_count_the_prewarms_by_outcome() -> None:
    metrics = RuntimeMetrics()
    stats = PrewarmStats(sent=3, skipped=5, failed=1)
    metrics.watch_prewarms(stats.counts)
    stats.sent += 1  # read at scrape time, not when watched
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    assert {s.labels["outcome"]: s.value for s in families["coreai_prewarms"].samples
            if s.name == "coreai_prewarms_total"} == {"sent": 4, "skipped": 5, "failed": 1}


def test_a_trace_id_that_carries_text_is_logged_as_a_hash() -> None:
    assert loggable_trace_id("trace-42") == "trace-42"
    hashed = loggable_trace_id("Alex asked about his sword Dawnbreaker")
    assert hashed.startswith("h-") and "Alex" not in hashed
    assert hashed == loggable_trace_id("Alex asked about his sword Dawnbreaker")  # stable: lines still group
