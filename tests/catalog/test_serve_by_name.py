"""`serve --model NAME`: a model pulled from the test server is hosted by its name and answers a turn; a catalogue
model that is not pulled yet is downloaded first while Health reports the download; unknown names are refused."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.app import RuntimeSettings
from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.pull import ModelPull
from pyruntime.cli.serve import EXIT_OK, serve
from pyruntime.client import RuntimeClient
from pyruntime.net.auth import read_token_file
from pyruntime.scopes import AgentMemoryScope
from tests.model.test_serve_cli import RPC_ANY_PORT, Serve
from tests.support.file_server import FileServer, Served
from tests.support.fixtures import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_a_pulled_model_is_served_by_its_name_and_answers_a_turn(server: FileServer, models_dir: Path,
                                                                 gguf_sha256: str, tmp_path: Path) -> None:
    pulled = subprocess.run(
        [sys.executable, "-m", "pyruntime.cli", "models", "pull", server.url("/tiny.gguf"), "--sha256", gguf_sha256,
         "--name", "blacksmith-npc", "--models-dir", str(models_dir)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert pulled.returncode == 0, pulled.stderr
    run = Serve(tmp_path, "--model", "blacksmith-npc", "--models-dir", str(models_dir), "--port", str(free_port()),
                "--data-dir", str(tmp_path / "data"), *RPC_ANY_PORT)
    try:
        ready = run.ready()
        token = read_token_file(Path(ready["token_file"]))
        with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=120) as client:
            health = client.health()
            assert health.model_ready and health.model == "blacksmith-npc" and health.model_download is None
            reply = client.run_task("hi", role_id="PlainChat", scope=AgentMemoryScope(user_id="p1"),
                                    max_output_tokens=8, forced_tool_mode="none")
            assert reply.status == pb.TURN_STATUS_OK and reply.text
    finally:
        assert run.stop() == 0


def test_an_unknown_name_is_refused_before_anything_starts(models_dir: Path, tmp_path: Path) -> None:
    run = Serve(tmp_path, "--model", "no-such-npc-model", "--models-dir", str(models_dir), "--session-only",
                *RPC_ANY_PORT)
    assert run.wait(60) == 2
    assert "--model must be a .gguf file or the name of a pulled or catalogue model; no-such-npc-model is neither" \
        in run.err


def test_serve_downloads_a_named_model_first_and_health_reports_the_download(
        server: FileServer, gguf_bytes: bytes, gguf_sha256: str, models_dir: Path, tmp_path: Path) -> None:
    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.05)  # ~1.6 s: Health can see it
    request = PullRequest("tiny-npc", server.url("/slow.gguf"), gguf_sha256, len(gguf_bytes), "catalogue")
    connect_port = free_port()
    options = RuntimeSettings(model=models_dir / "tiny-npc.gguf", model_pull=ModelPull(request, ModelCache(models_dir)),
                           port=free_port(), data_dir=tmp_path / "data", grpc_port=0, connect_port=connect_port)
    token_file = tmp_path / "data" / "CoreAI" / "runtime" / "token"
    seen: dict[str, Any] = {"during": []}

    def watch() -> None:  # Health while serve starts: the download's progress, then ready
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "ready" not in seen:
            try:
                with RuntimeClient(f"http://127.0.0.1:{connect_port}", token=read_token_file(token_file),
                                   timeout=10) as client:
                    health = client.health()
                body = httpx.get(f"http://127.0.0.1:{connect_port}/healthz", timeout=10).json()
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.02)
                continue
            if health.model_download is not None:
                seen["during"].append((health, body))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def stop_when_watched() -> None:
        watcher.join(30)
        os.kill(os.getpid(), signal.SIGTERM)

    def on_ready(ready: dict[str, Any]) -> None:
        seen["ready"] = ready
        threading.Thread(target=stop_when_watched, daemon=True).start()

    assert asyncio.run(serve(options, on_ready=on_ready)) == EXIT_OK
    assert (models_dir / "tiny-npc.gguf").read_bytes() == gguf_bytes  # pulled into the cache, checked
    assert ModelCache(models_dir).get("tiny-npc") is not None
    during = seen["during"]
    assert len(during) >= 2, "Health never showed the download"
    for health, _ in during:
        assert not health.ready and not health.model_ready and health.model_download.model == "tiny-npc"
        assert health.model_download.total_bytes == len(gguf_bytes)
    # /healthz is read just after the RPC: the last one may already see the model loading, not downloading.
    bodies = [body for _, body in during if body["reason"].startswith("downloading model tiny-npc:")]
    assert bodies and all(body["modelState"] == "loading" and not body["ready"] for body in bodies)
    received = [h.model_download.received_bytes for h, _ in during]
    assert received == sorted(received) and received[0] < received[-1]
