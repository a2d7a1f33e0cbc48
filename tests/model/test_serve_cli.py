"""`coreai-runtime serve` as a real subprocess: starts the model server, answers, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS
from pyruntime.model.hosting import port_is_free
from tests.support.fixtures import free_port

ROOT = Path(__file__).resolve().parents[2]


class Serve:
    """A running `coreai-runtime serve`; its stderr goes to a file the test can poll."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.log = tmp_path / f"serve-{time.monotonic_ns()}.log"
        with self.log.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pyruntime.cli", "serve", *args],
                cwd=ROOT,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
            )

    @property
    def err(self) -> str:
        return self.log.read_text()

    def wait_for_log(self, text: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.err:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited early with {self.process.returncode}: {self.err}")
            if time.monotonic() > deadline:
                raise AssertionError(f"serve never logged {text!r}: {self.err}")
            time.sleep(0.05)

    def wait(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout)

    def stop(self) -> int:
        """SIGTERM, then the exit code (killed and failed if it does not stop)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def test_serve_hosts_a_model_file_and_stops_cleanly_on_sigterm(tiny_model_path, tmp_path):
    port = free_port()
    serve = Serve(tmp_path, "--model", str(tiny_model_path), "--port", str(port))
    try:
        serve.wait_for_log("ready;")
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()
    finally:
        rc = serve.stop()
    assert [m["id"] for m in models["data"]] == ["tiny"]
    assert rc == 0
    assert "loading model" in serve.err and "ready in" in serve.err and "model server stopped" in serve.err
    assert port_is_free("127.0.0.1", port)  # the llama.cpp child is gone too


def test_serve_with_llm_url_checks_the_external_server_and_hosts_nothing(tiny_server_url, tmp_path):
    serve = Serve(tmp_path, "--llm-url", tiny_server_url)
    try:
        serve.wait_for_log("ready;")
    finally:
        rc = serve.stop()
    assert rc == 0
    assert "external model server answers with 1 model(s)" in serve.err
    assert "loading model" not in serve.err


def test_serve_exits_when_its_model_server_dies(tiny_model_path, tmp_path):
    port = free_port()
    serve = Serve(tmp_path, "--model", str(tiny_model_path), "--port", str(port))
    try:
        serve.wait_for_log("ready;")
        child = next(p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_child_server(p, port))
        os.kill(int(child.name), signal.SIGKILL)
        rc = serve.wait()
    finally:
        if serve.process.poll() is None:
            serve.stop()
    assert rc == 1
    assert "model server exited unexpectedly" in serve.err


def _is_child_server(proc: Path, port: int) -> bool:
    try:
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"pyruntime.model.llama_server" in cmdline and any(f'"port": {port}'.encode() in a for a in cmdline)


def test_serve_fails_fast_when_the_external_server_is_down(tmp_path):
    serve = Serve(tmp_path, "--llm-url", f"http://127.0.0.1:{free_port()}/v1")
    assert serve.wait() == 1
    assert "cannot connect" in serve.err


def test_serve_refuses_bad_arguments(tmp_path):
    serve = Serve(tmp_path, "--model", str(tmp_path / "model.bin"), "--port", str(free_port()))
    assert serve.wait() == 2
    assert ".gguf" in serve.err


@pytest.mark.slow
def test_serve_without_arguments_hosts_the_embedded_smollm2_and_it_chats(tmp_path):
    port = free_port()
    serve = Serve(tmp_path, "--port", str(port))
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        serve.wait_for_log("ready;")

        async def ask():
            async with OpenAICompatClient(base_url) as client:
                models = await client.models()
                reply = await client.chat(
                    [{"role": "user", "content": "Name one colour of the sky."}], max_tokens=24, temperature=0
                )
                return models, reply

        models, reply = asyncio.run(ask())
    finally:
        rc = serve.stop()
    assert models == [EMBEDDED_MODEL_ALIAS]
    assert reply.text.strip()
    assert reply.model == EMBEDDED_MODEL_ALIAS
    assert rc == 0
