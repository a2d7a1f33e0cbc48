"""`coreai-runtime serve` as a real subprocess: model server + orchestrator + gRPC/Connect, ready line, clean stop.

Every serve here binds free ports (never the defaults 13333/13334/13335) and a data dir under tmp.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeClient, RuntimeUnavailableError
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS
from pyruntime.model.hosting.engine_place import port_is_free
from pyruntime.model.hosting.llama_server import DEFAULT_SLOTS
from pyruntime.model.hosting.process import SMALL_MODEL_PROMPT_CACHE_MB
from pyruntime.net.auth import read_token_file
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores
from pyruntime.testing.engine import LatencyEngine, LatencyEngineServer, LatencyModel
from tests.support.fixtures import free_port
from tests.support.loads import loaded
from tests.unity_layer.processes import cmdline, is_alive, processes_mentioning, wait_for

ROOT = Path(__file__).resolve().parents[2]
RPC_ANY_PORT = ("--grpc-port", "0", "--connect-port", "0")
SCOPE = AgentMemoryScope(user_id="player-1")


class Serve:
    """A running `coreai-runtime serve`; stdout and stderr go to files the test can poll."""

    port: int  # the model port, where serve_with_model chose it

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        stamp = time.monotonic_ns()
        self.log = tmp_path / f"serve-{stamp}.log"
        self.out = tmp_path / f"serve-{stamp}.out"
        with self.log.open("w") as err, self.out.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pyruntime.cli", "serve", *args],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                stdout=out,
                stderr=err,
                text=True,
            )

    @property
    def err(self) -> str:
        return self.log.read_text()

    def stdout_lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def wait_for_log(self, text: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.err:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited early with {self.process.returncode}: {self.err}")
            if time.monotonic() > deadline:
                raise AssertionError(f"serve never logged {text!r}: {self.err}")
            time.sleep(0.05)

    def ready(self, timeout: float = 90.0) -> dict:
        """The parsed JSON ready line (waits for it)."""
        self.wait_for_log("ready;", timeout)
        lines = self.stdout_lines()
        assert len(lines) == 1, f"exactly one line on stdout, got {lines!r}"
        return json.loads(lines[0])

    def wait(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal, then the exit code (killed and failed if it does not stop)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def model_children(model: Path) -> list[int]:
    """Live llama-server processes hosting `model` (whoever their parent is now; each test hosts its own copy)."""
    return [pid for pid in processes_mentioning(str(model))
            if cmdline(pid) and Path(cmdline(pid)[0]).name.startswith("llama-server")]


def own_copy(tmp_path: Path, model: Path) -> Path:
    """The model copied under tmp_path, so this test's engine is told apart from every other one."""
    copy = tmp_path / "model.gguf"
    if not copy.exists():
        copy.write_bytes(model.read_bytes())
    return copy


def serve_with_model(tmp_path: Path, model: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[Serve, Path]:
    """serve hosting its own copy of `model` on free ports; returns it and the model copy."""
    port = free_port()
    copy = own_copy(tmp_path, model)
    serve = Serve(tmp_path, "--model", str(copy), "--port", str(port), "--data-dir", str(tmp_path / "data"),
                  *RPC_ANY_PORT, *extra, env=env)
    serve.port = port
    return serve, copy


def test_serve_runs_the_whole_runtime_over_both_transports_and_stops_cleanly(tiny_endless_model_path, tmp_path):
    data_dir = tmp_path / "data"
    # The endless variant: the plain tiny model samples <|im_end|> first now and then (an empty reply).
    serve, model = serve_with_model(tmp_path, tiny_endless_model_path, "--tool-mode", "native")
    port = serve.port
    try:
        ready = serve.ready()
        assert set(ready) == {"grpc_port", "connect_port", "model_url", "token_file", "model_key_file"}
        assert ready["model_url"] == f"http://127.0.0.1:{port}/v1"
        assert Path(ready["token_file"]) == data_dir / "CoreAI" / "runtime" / "token"
        token = read_token_file(Path(ready["token_file"]))
        key_file = Path(ready["model_key_file"])
        assert key_file == data_dir / "CoreAI" / "runtime" / "model_key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        model_key = read_token_file(key_file)
        # The model port wants that key (the runtime's own turns below pass it by themselves).
        assert httpx.get(f"{ready['model_url']}/models").status_code == 401
        assert httpx.get(f"{ready['model_url']}/models",
                         headers={"Authorization": f"Bearer {model_key}"}).status_code == 200
        [child] = model_children(model)
        assert model_key not in " ".join(cmdline(child))  # never on a command line
        urls = {"grpc": f"grpc://127.0.0.1:{ready['grpc_port']}",
                "connect": f"http://127.0.0.1:{ready['connect_port']}"}
        for transport, url in urls.items():
            with RuntimeClient(url, token=token, timeout=120) as client:
                health = client.health()
                assert health.ready and health.model_ready and health.model == "model"
                assert health.memory_design == "writer"  # a small hosted model: the memory writer pass
                # ... and the default host prompt cache and slots; Health reports them and the engine's memory.
                assert health.prompt_cache_limit_bytes == SMALL_MODEL_PROMPT_CACHE_MB << 20
                assert health.model_state == "ready" and health.model_slots == DEFAULT_SLOTS
                assert health.model_rss_bytes > 0 or not sys.platform.startswith("linux")
                written = client.apply_memory_tool("Blacksmith", {"action": "append", "content": f"via {transport}"},
                                                   scope=SCOPE)
                assert written.success, written.error
                turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=8,
                                       forced_tool_mode="none")
                assert turn.status == pb.TURN_STATUS_OK and turn.text
    finally:
        rc = serve.stop()
    assert rc == 0
    assert token not in serve.err and model_key not in serve.err  # keys are never logged
    assert not is_alive(child) and model_children(model) == []
    assert port_is_free("127.0.0.1", port)
    assert "RPC servers stopped" in serve.err and "model server stopped" in serve.err
    # Both writes and both turns are on disk after the runtime stopped (PlainChat persists its history).
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
    loaded = stores.memory.try_load(storage_key("Blacksmith", SCOPE))
    assert loaded.status is LoadStatus.LOADED and loaded.state is not None
    assert loaded.state.memory.splitlines() == ["via grpc", "via connect"]
    history = stores.scoped(SCOPE).get_chat_history("PlainChat")
    assert [m.content for m in history if m.role == "user"] == ["hi", "hi"]


def test_with_the_disk_prompt_cache_a_restarted_runtime_starts_the_npc_warm(tiny_model_path, tmp_path):
    # The first turn after a restart evaluates about what the same turn evaluates on a warm runtime.
    def run(data_dir: Path, *hints: str) -> list[pb.TurnUsage]:
        port = free_port()
        serve = Serve(tmp_path, "--model", str(tiny_model_path), "--port", str(port), "--data-dir", str(data_dir),
                      *RPC_ANY_PORT, "--tool-mode", "native", "--prompt-cache-dir")
        try:
            ready = serve.ready()
            token = read_token_file(Path(ready["token_file"]))
            with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=120) as client:
                # Temperature 0: the same request gets the same reply in both runs (llama-server seeds each
                # request afresh, so at the default temperature the two runs' histories would differ).
                turns = [client.run_task(hint, role_id="PlainChat", scope=SCOPE, max_output_tokens=8,
                                         forced_tool_mode="none", temperature=0.0) for hint in hints]
        finally:
            assert serve.stop() == 0
        assert [t.status for t in turns] == [pb.TURN_STATUS_OK] * len(hints)
        return [t.usage for t in turns]

    restarted = tmp_path / "restarted"
    [first] = run(restarted, "hello there")
    assert first.cached_prompt_tokens == 0
    assert list((restarted / "CoreAI" / "runtime" / "prompt-cache").glob("*.slot"))  # the slot, saved at the stop
    anchors = (restarted / "CoreAI" / "runtime" / "prompt-cache" / "tail-anchors.json").read_text()
    assert "PlainChat" not in anchors and SCOPE.user_id not in anchors  # digests only
    [after_restart] = run(restarted, "and again")
    [_, warm] = run(tmp_path / "warm", "hello there", "and again")  # the same two turns in one run
    assert after_restart.prompt_tokens == warm.prompt_tokens  # the same request (temperature 0, same history)
    assert after_restart.cached_prompt_tokens > 0
    assert after_restart.evaluated_prompt_tokens <= 1.5 * warm.evaluated_prompt_tokens


def test_serve_restarts_its_model_server_when_it_dies(tiny_endless_model_path, tmp_path):
    serve, model = serve_with_model(tmp_path, tiny_endless_model_path)  # a reply always has text (see above)
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        [child] = model_children(model)
        os.kill(child, signal.SIGKILL)
        serve.wait_for_log("model server restarted")
        [new_child] = model_children(model)
        assert new_child != child
        with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=120) as client:
            assert client.health().model_ready
            turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=8,
                                   forced_tool_mode="none")
            assert turn.status == pb.TURN_STATUS_OK and turn.text
    finally:
        rc = serve.stop()
    assert rc == 0
    assert "model server: the model server exited; restarting it" in serve.err
    assert model_children(model) == []


def test_a_model_that_cannot_be_kept_up_leaves_memory_served_and_comes_back_without_a_restart_of_serve(
        tiny_model_path, tmp_path):
    # Degrade, never die: every restart fails while the model file is broken; serve keeps serving
    # memory and health (modelState failed, with why), turns answer UNAVAILABLE; once the file is back,
    # the watchdog's next attempt brings the model back and a turn runs, in the same serve.
    serve, model = serve_with_model(tmp_path, tiny_model_path)
    good = model.read_bytes()
    errors = []
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        urls = (f"grpc://127.0.0.1:{ready['grpc_port']}", f"http://127.0.0.1:{ready['connect_port']}")
        model.write_bytes(b"not a model")  # every restart fails from now on
        [child] = model_children(model)
        os.kill(child, signal.SIGKILL)
        serve.wait_for_log("restart failed")
        healthz = httpx.get(f"http://127.0.0.1:{ready['connect_port']}/healthz", timeout=10)
        assert healthz.status_code == 503 and healthz.json()["modelState"] in ("restarting", "failed")
        assert healthz.json()["reason"]
        for url in urls:
            with RuntimeClient(url, token=token, timeout=30) as client:
                health = client.health()
                assert not health.model_ready and health.model_state in ("restarting", "failed")
                with pytest.raises(RuntimeUnavailableError) as failed:
                    client.run_task("hi", role_id="PlainChat", scope=SCOPE)
                errors.append(str(failed.value))
                written = client.apply_memory_tool("Merchant", {"action": "append", "content": "still saved"},
                                                   scope=SCOPE)
                assert written.success, written.error
        assert serve.process.poll() is None  # serve did not exit
        model.write_bytes(good)
        serve.wait_for_log("model server restarted", timeout=120)
        with RuntimeClient(urls[0], token=token, timeout=120) as client:
            assert client.health().model_ready
            turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=8,
                                   forced_tool_mode="none")
            assert turn.status == pb.TURN_STATUS_OK
    finally:
        rc = serve.stop()
    assert all("retry in about" in e or "keeps trying" in e for e in errors), errors
    assert rc == 0
    assert model_children(model) == []


def test_sigterm_while_the_model_loads_leaves_no_child(tiny_model_path, tmp_path):
    # The engine is held 60 s before it loads (the tiny model alone loads in ~2 s, faster than the signal came).
    serve, model = serve_with_model(tmp_path, tiny_model_path, env=slow_engine(tmp_path, 60))
    try:
        serve.wait_for_log("loading model")
        wait_for(lambda: any(cmdline(pid)[1:2] == [str(tmp_path / "slow-llama-server")]
                             for pid in processes_mentioning(str(model))), 30, "the held engine started")
    finally:
        rc = serve.stop()
    assert rc == 0
    assert "stopped while starting" in serve.err
    assert serve.stdout_lines() == []  # never announced ready
    wait_for(lambda: processes_mentioning(str(model)) == [], 5, "no engine or wrapper left")


def test_a_taken_rpc_port_fails_before_the_model_loads(tiny_model_path, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        port = free_port()
        model = own_copy(tmp_path, tiny_model_path)
        serve = Serve(tmp_path, "--model", str(model), "--port", str(port), "--data-dir",
                      str(tmp_path / "data"), "--grpc-port", "0", "--connect-port", str(taken))
        rc = serve.wait()
    assert rc == 1
    assert f"port {taken} (--connect-port)" in serve.err
    assert "loading model" not in serve.err and model_children(model) == []


def test_an_rpc_bind_failure_fails_before_the_model_loads(tiny_model_path, tmp_path):
    # On IPv6 the early free-port check is skipped, so the bind itself fails (the ports open before the model).
    with socket.socket(socket.AF_INET6) as busy:
        busy.bind(("::1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        serve, model = serve_with_model(tmp_path, tiny_model_path, "--listen", "::1", "--connect-port", str(taken))
        rc = serve.wait(60)
    assert rc == 1
    assert "Address already in use" in serve.err and "loading model" not in serve.err
    assert serve.stdout_lines() == [] and model_children(model) == []


def slow_engine(tmp_path: Path, seconds: float) -> dict[str, str]:
    """The environment of a serve whose llama-server takes `seconds` more to start (a large model's load):
    the real binary, started through a script that waits first."""
    from pyruntime.model.hosting.llama_server import LLAMA_SERVER_ENV, find_llama_server

    script = tmp_path / "slow-llama-server"
    script.write_text(f"#!/bin/sh\nsleep {seconds}\nexec {find_llama_server()} \"$@\"\n")
    script.chmod(0o755)
    return {LLAMA_SERVER_ENV: str(script)}


def test_while_the_first_model_load_runs_health_says_loading_and_turns_answer_unavailable(tiny_model_path, tmp_path):
    grpc_port, connect_port = free_port(), free_port()
    serve, _ = serve_with_model(tmp_path, tiny_model_path, "--grpc-port", str(grpc_port),
                                "--connect-port", str(connect_port), env=slow_engine(tmp_path, 3))
    token_file = tmp_path / "data" / "CoreAI" / "runtime" / "token"
    healthz = f"http://127.0.0.1:{connect_port}/healthz"
    # (healthz body, grpc health, turn error), kept only when /healthz still said 503 after them
    during_load: list[tuple[Any, int, str]] = []
    try:
        # From the moment the port accepts until the ready line: the load is in progress, observably.
        while not serve.stdout_lines() and not during_load:
            assert serve.process.poll() is None, serve.err
            try:
                answer = httpx.get(healthz, timeout=10)
            except httpx.TransportError:
                time.sleep(0.02)
                continue
            if answer.status_code != 503:
                continue
            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                stub: Any = health_pb2_grpc.HealthStub(channel)  # types-grpcio's HealthStub declares no methods
                grpc_status = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
            with RuntimeClient(f"http://127.0.0.1:{connect_port}", token=read_token_file(token_file),
                               timeout=10) as client:
                with pytest.raises(RuntimeUnavailableError) as refused:
                    client.run_task("hi", role_id="PlainChat", scope=SCOPE)
            if httpx.get(healthz, timeout=10).status_code == 503:  # all three were answered during the load
                during_load.append((answer.json(), grpc_status, str(refused.value)))
        ready = serve.ready()  # the ready line still comes, once the model is up
        assert set(ready) == {"grpc_port", "connect_port", "model_url", "token_file", "model_key_file"}
        assert (ready["grpc_port"], ready["connect_port"]) == (grpc_port, connect_port)
        after = httpx.get(healthz, timeout=10)
        assert after.status_code == 200 and after.json()["modelState"] == "ready"
    finally:
        rc = serve.stop()
    assert rc == 0
    assert during_load, "no /healthz 503 was seen before the ready line"
    [(body, grpc_status, error)] = during_load
    assert body["modelState"] == "loading" and body["reason"] and not body["ready"] and not body["modelReady"]
    assert grpc_status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert "loading" in error and "retry" in error


def test_serve_with_llm_url_runs_turns_there_and_hosts_nothing(tiny_server_url, tmp_path):
    serve = Serve(tmp_path, "--llm-url", tiny_server_url, "--data-dir", str(tmp_path / "data"), *RPC_ANY_PORT)
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=120) as client:
            assert client.health().model == "tiny-test-model"
            assert client.health().memory_design == "tool"  # an external server keeps the memory tool
            turn = client.run_task("hi", role_id="PlainChat", max_output_tokens=8, forced_tool_mode="none")
            assert turn.status == pb.TURN_STATUS_OK
    finally:
        rc = serve.stop()
    assert rc == 0
    assert ready["model_url"] == tiny_server_url
    assert "external model server answers with 1 model(s)" in serve.err
    assert "loading model" not in serve.err


@pytest.mark.parametrize("loop", ["auto", "asyncio", "uvloop"])
def test_serve_runs_its_turns_on_the_event_loop_asked_for(tmp_path, loop):
    # uvloop by default where it is installed (every platform but Windows); the standard loop when asked.
    with LatencyEngineServer(LatencyEngine(LatencyModel(first_token_s=0.001, tokens=4, token_gap_s=0.001))) as engine:
        serve = Serve(tmp_path, "--llm-url", engine.base_url, "--session-only", "--event-loop", loop, *RPC_ANY_PORT)
        try:
            ready = serve.ready()
            token = read_token_file(Path(ready["token_file"]))
            for url in (f"grpc://127.0.0.1:{ready['grpc_port']}", f"http://127.0.0.1:{ready['connect_port']}"):
                with RuntimeClient(url, token=token, timeout=60) as client:
                    events = list(client.stream_task("hi", role_id="PlainChat", max_output_tokens=8))
                    assert events[-1].final.status == pb.TURN_STATUS_OK and events[-1].final.text == "ok ok ok ok"
        finally:
            rc = serve.stop()
    assert rc == 0
    assert f"event loop: {'uvloop' if loop == 'auto' else loop}" in serve.err


def test_no_model_session_only_serves_stores_and_refuses_turns(tmp_path):
    serve = Serve(tmp_path, "--no-model", "--session-only", *RPC_ANY_PORT)
    try:
        ready = serve.ready()
        token_file = Path(ready["token_file"])
        with RuntimeClient(f"http://127.0.0.1:{ready['connect_port']}", token=read_token_file(token_file)) as client:
            assert client.apply_memory_tool("Merchant", {"action": "write", "content": "prices"}).success
            assert loaded(client.load_state("Merchant")).memory == "prices"
            assert not client.health().model_ready and client.health().memory_design == ""
            with pytest.raises(RuntimeUnavailableError, match="no model"):
                client.run_task("hi")
    finally:
        rc = serve.stop(signal.SIGINT)
    assert rc == 0
    assert ready["model_url"] is None
    assert not token_file.parent.exists()  # the private token folder of a data-dir-less runtime is removed
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([serve.log.name, serve.out.name])  # no saves


def test_serve_fails_fast_when_the_external_server_is_down(tmp_path):
    serve = Serve(tmp_path, "--llm-url", f"http://127.0.0.1:{free_port()}/v1", "--session-only", *RPC_ANY_PORT)
    assert serve.wait() == 1
    assert "cannot connect" in serve.err
    assert serve.stdout_lines() == []


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--model", "model.bin", "--session-only"), {}, "--model must be a .gguf file"),
        (("--no-model",), {}, "--data-dir is required"),
        (("--no-model", "--session-only", "--listen", "0.0.0.0"), {"COREAI_RUNTIME_TOKEN": ""},
         "set COREAI_RUNTIME_TOKEN"),
        (("--no-model", "--session-only", "--grpc-port", "14000", "--connect-port", "14000"), {}, "must differ"),
        (("--no-model", "--session-only", "--grpc-port", "70000"), {}, "--grpc-port must be within 0..65535"),
        (("--no-model", "--session-only", "--chat-history-cap", "0"), {}, "--chat-history-cap"),
        (("--no-model", "--session-only", "--threads", "0"), {}, "--threads must be at least 1"),
        (("--no-model", "--session-only", "--n-gpu-layers", "-2"), {}, "--n-gpu-layers must be -1 (all)"),
        (("--no-model", "--llm-url", "http://127.0.0.1:1/v1"), {}, "not allowed with argument"),
    ],
)
def test_serve_refuses_bad_arguments_and_starts_nothing(tmp_path, args, env, message):
    serve = Serve(tmp_path, *args, env=env)
    assert serve.wait() == 2
    assert message in serve.err
    assert serve.stdout_lines() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([serve.log.name, serve.out.name])


@pytest.mark.slow
def test_serve_without_a_model_flag_hosts_the_embedded_smollm2_and_it_chats(tmp_path):
    port = free_port()
    serve = Serve(tmp_path, "--port", str(port), "--data-dir", str(tmp_path / "data"), *RPC_ANY_PORT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        ready = serve.ready()
        model_key = read_token_file(Path(ready["model_key_file"]))

        async def ask():
            async with OpenAICompatClient(base_url, api_key=model_key) as client:
                models = await client.models()
                reply = await client.chat(
                    [{"role": "user", "content": "Name one colour of the sky."}], max_tokens=24, temperature=0
                )
                return models, reply

        models, reply = asyncio.run(ask())
        with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}",
                           token=read_token_file(Path(ready["token_file"]))) as client:
            assert client.health().model == EMBEDDED_MODEL_ALIAS
        hosted = httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {model_key}"}).json()
    finally:
        rc = serve.stop()
    assert models == [EMBEDDED_MODEL_ALIAS] and [m["id"] for m in hosted["data"]] == [EMBEDDED_MODEL_ALIAS]
    assert reply.text.strip()
    assert reply.model == EMBEDDED_MODEL_ALIAS
    assert rc == 0


def test_llm_url_with_a_key_runs_a_turn_against_a_keyed_server_and_without_it_is_refused(tiny_model_path, tmp_path):
    # A keyed OpenAI-compatible server (here our own guarded llama-server, which demands a key).
    from tests.support.fixtures import start_llama_server

    key = "external-key-0123456789abcdef"
    server = start_llama_server(tiny_model_path, api_key=key)
    try:
        refused = Serve(tmp_path, "--llm-url", server.base_url, "--session-only", *RPC_ANY_PORT)
        assert refused.wait() == 1 and "HTTP 401; check the API key" in refused.err
        key_file = tmp_path / "llm.key"
        key_file.write_text(key + "\n")
        for how, env in ((("--llm-api-key-file", str(key_file)), {}), ((), {"COREAI_LLM_API_KEY": key})):
            serve = Serve(tmp_path, "--llm-url", server.base_url, "--session-only", *RPC_ANY_PORT,
                          "--llm-header", "X-Game: demo", *how, env=env)
            try:
                ready = serve.ready()
                token = read_token_file(Path(ready["token_file"]))
                with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=120) as client:
                    turn = client.run_task("hi", role_id="PlainChat", max_output_tokens=4, forced_tool_mode="none")
                    assert turn.status == pb.TURN_STATUS_OK, turn.error
            finally:
                assert serve.stop() == 0
            assert key not in serve.err  # never logged
    finally:
        server.stop()


def test_llm_headers_reach_the_external_server(tmp_path):
    import http.server
    import threading

    seen: list[dict[str, str]] = []

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = b'{"object": "list", "data": [{"id": "provider-model"}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    provider = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    try:
        serve = Serve(tmp_path, "--llm-url", f"http://127.0.0.1:{provider.server_address[1]}/v1", "--session-only",
                      *RPC_ANY_PORT, "--llm-header", "X-Title: My Game", "--llm-header", "OpenAI-Organization: org-1",
                      env={"COREAI_LLM_API_KEY": "sk-test-abcdef0123456789"})
        try:
            serve.ready()
        finally:
            assert serve.stop() == 0
    finally:
        provider.shutdown()
    assert seen and seen[0]["authorization"] == "Bearer sk-test-abcdef0123456789"
    assert seen[0]["x-title"] == "My Game" and seen[0]["openai-organization"] == "org-1"


@pytest.mark.parametrize(("args", "message"), [
    (("--llm-header", "X-A: 1"), "are for an --llm-url server"),
    (("--llm-url", "http://127.0.0.1:1/v1", "--llm-header", "no colon"), '--llm-header must be "Name: value"'),
    (("--llm-url", "http://127.0.0.1:1/v1", "--llm-header", "Authorization: Bearer x"), "cannot carry the key"),
    (("--llm-url", "http://127.0.0.1:1/v1", "--llm-api-key-file", "/nonexistent/key"), "cannot be read"),
    (("--slots", "0", "--model", "m.gguf"), "--slots must be within"),
])
def test_llm_url_key_and_header_flags_are_checked_before_anything_starts(tmp_path, args, message):
    serve = Serve(tmp_path, *args, "--session-only", *RPC_ANY_PORT)
    assert serve.wait() == 2
    assert message in serve.err and serve.stdout_lines() == []


def test_chat_reads_the_llm_key_from_a_file_or_the_environment(tmp_path, monkeypatch):
    from pyruntime.cli import build_parser
    from pyruntime.cli.chat import _options as chat_options

    key_file = tmp_path / "llm.key"
    key_file.write_text("file-key-0123456789\n")
    base = ["chat", "--llm-url", "http://127.0.0.1:1/v1", "--data-dir", str(tmp_path)]
    monkeypatch.delenv("COREAI_LLM_API_KEY", raising=False)
    assert chat_options(build_parser().parse_args([*base, "--llm-api-key-file", str(key_file)])).api_key == \
        "file-key-0123456789"
    monkeypatch.setenv("COREAI_LLM_API_KEY", "env-key-0123456789")
    assert chat_options(build_parser().parse_args(base)).api_key == "env-key-0123456789"
