"""Hosting llama.cpp in a child process: start, answer, settings, stop, bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.errors import ModelUnavailableError
from pyruntime.model.hosting import LlamaServerProcess, hosted_model_config, port_is_free
from pyruntime.model.llama_server import LlamaServerConfig, effective_n_ctx
from tests.support.fixtures import free_port
from tests.support.tiny_model import TINY_CONTEXT_LENGTH, TINY_MODEL_ALIAS

ROOT = Path(__file__).resolve().parents[2]


def test_server_lists_the_alias_and_never_the_file_path(tiny_llama_server, tiny_model_path):
    models = httpx.get(f"{tiny_llama_server.base_url}/models").json()
    assert [m["id"] for m in models["data"]] == [TINY_MODEL_ALIAS]
    # A request without `model` would make llama-cpp-python echo the file path; the alias is injected.
    reply = httpx.post(
        f"{tiny_llama_server.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    assert reply.status_code == 200
    assert reply.json()["model"] == TINY_MODEL_ALIAS
    assert str(tiny_model_path) not in reply.text and tiny_model_path.name not in reply.text


def test_context_defaults_to_8192_clamped_to_the_trained_context(tiny_llama_server):
    assert tiny_llama_server.config.n_ctx == TINY_CONTEXT_LENGTH  # 8192 asked, the model knows 2048
    assert tiny_llama_server.config.interrupt_requests is False
    # Half the cores, at least one: llama.cpp must leave cores to the game (issue 9).
    assert tiny_llama_server.config.n_threads == max(1, len(os.sched_getaffinity(0)) // 2)
    assert effective_n_ctx(None, 32768) == 8192
    assert effective_n_ctx(16384, 8192) == 8192
    assert effective_n_ctx(512, None) == 512
    with pytest.raises(InvalidArgumentError):
        effective_n_ctx(8, 2048)


def test_stop_ends_the_child_and_frees_the_port(tiny_model_path):
    server = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias="t", port=free_port()))
    server.start(timeout=60)
    try:
        assert server.is_alive()
        assert server.startup_seconds is not None
    finally:
        server.stop()
    assert not server.is_alive()
    assert port_is_free(server.config.host, server.config.port)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.base_url}/models")


def test_missing_or_bad_model_files_are_refused_before_anything_starts(tmp_path):
    missing = LlamaServerProcess(LlamaServerConfig(model_path=tmp_path / "nope.gguf", alias="x", port=free_port()))
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        missing.start()
    assert missing.pid is None
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(InvalidArgumentError, match="not a GGUF"):
        LlamaServerProcess(LlamaServerConfig(model_path=junk, alias="x", port=free_port())).start()
    with pytest.raises(InvalidArgumentError, match=".gguf"):
        hosted_model_config(tmp_path / "model.bin")
    with pytest.raises(InvalidArgumentError):
        LlamaServerConfig(model_path=junk, alias=" ", port=1)


def test_a_busy_port_is_reported_without_starting_a_child(tiny_model_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias="t", port=port))
        with pytest.raises(ModelUnavailableError, match="already in use"):
            server.start()
        assert server.pid is None


def test_a_child_that_dies_while_loading_is_reported_with_its_last_words(tmp_path):
    # A GGUF header llama.cpp cannot load (no tensors, no tokenizer): the child exits during startup.
    from tests.support.tiny_model import write_tiny_model

    good = write_tiny_model(tmp_path / "good.gguf")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    server = LlamaServerProcess(LlamaServerConfig(model_path=broken, alias="t", port=free_port()))
    with pytest.raises(ModelUnavailableError, match="exited with code"):
        server.start(timeout=60)
    assert not server.is_alive()


def test_the_child_exits_when_its_parent_dies(tiny_model_path, tmp_path):
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from pyruntime.model.hosting import LlamaServerProcess
        from pyruntime.model.llama_server import LlamaServerConfig
        config = LlamaServerConfig(model_path=Path({str(tiny_model_path)!r}), alias="t", port={free_port()})
        s = LlamaServerProcess(config)
        s.start(timeout=60)
        Path({str(pid_file)!r}).write_text(str(s.pid))
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.05)
        child = int(pid_file.read_text())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.1)
    assert not _running(child)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_config_round_trips_through_json(tiny_model_path):
    config = LlamaServerConfig(model_path=tiny_model_path, alias="a", port=1234, n_ctx=512, sse_ping_interval_s=1.0)
    assert LlamaServerConfig.from_json(config.to_json()) == config
    assert json.loads(config.to_json())["interrupt_requests"] is False


def test_n_gpu_layers_flows_from_the_serve_flag_to_the_childs_model_settings(tiny_model_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args
    from pyruntime.model.llama_server import model_settings

    args = build_parser().parse_args(["serve", "--model", str(tiny_model_path), "--n-gpu-layers", "-1"])
    options = options_from_args(args)
    config = hosted_model_config(options.model, n_gpu_layers=options.n_gpu_layers)
    child = LlamaServerConfig.from_json(config.to_json())  # what the child process receives
    assert model_settings(child).n_gpu_layers == -1
    assert model_settings(hosted_model_config(tiny_model_path)).n_gpu_layers == 0  # default: CPU only


def test_n_gpu_layers_below_minus_one_is_refused(tiny_model_path):
    with pytest.raises(InvalidArgumentError, match="n_gpu_layers must be -1"):
        hosted_model_config(tiny_model_path, n_gpu_layers=-2)


def test_a_cpu_build_hosts_with_all_layers_asked_on_the_gpu(tiny_model_path):
    # The default wheel has no GPU backend: --n-gpu-layers -1 must still load and answer on the CPU.
    server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), n_gpu_layers=-1, api_key="k"))
    server.start(timeout=60)
    try:
        reply = httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer k"}, timeout=10)
        assert reply.status_code == 200
    finally:
        server.stop()


def test_a_small_model_gets_a_prompt_cache_by_default_and_a_large_one_none(tiny_model_path, tmp_path):
    from pyruntime.model.hosting import SMALL_MODEL_MAX_BYTES, SMALL_MODEL_PROMPT_CACHE_MB

    assert hosted_model_config(tiny_model_path).prompt_cache_mb == SMALL_MODEL_PROMPT_CACHE_MB
    assert hosted_model_config(None).prompt_cache_mb == SMALL_MODEL_PROMPT_CACHE_MB  # the embedded SmolLM2
    large = tmp_path / "large.gguf"
    with large.open("wb") as f:  # sparse: the size is what decides, nothing is read
        f.truncate(SMALL_MODEL_MAX_BYTES)
    assert hosted_model_config(large).prompt_cache_mb == 0
    assert hosted_model_config(large, prompt_cache_mb=64).prompt_cache_mb == 64
    assert hosted_model_config(tiny_model_path, prompt_cache_mb=0).prompt_cache_mb == 0  # off when asked


def test_the_serve_flag_decides_the_prompt_cache_and_its_absence_leaves_the_default(tiny_model_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args
    from pyruntime.model.hosting import SMALL_MODEL_PROMPT_CACHE_MB

    def cache_of(*flags: str) -> int:
        options = options_from_args(build_parser().parse_args(["serve", "--model", str(tiny_model_path), *flags]))
        config = hosted_model_config(options.model, prompt_cache_mb=options.prompt_cache_mb)
        return LlamaServerConfig.from_json(config.to_json()).prompt_cache_mb  # what the child receives

    assert cache_of() == SMALL_MODEL_PROMPT_CACHE_MB
    assert cache_of("--prompt-cache-mb", "0") == 0
    assert cache_of("--prompt-cache-mb", "32") == 32


def test_the_prompt_cache_folder_flows_from_the_serve_flag_to_the_child(tiny_model_path, tmp_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import PROMPT_CACHE_RELATIVE_PATH, options_from_args, validate

    def folder_of(*flags: str) -> Path | None:
        options = options_from_args(build_parser().parse_args(["serve", "--model", str(tiny_model_path), *flags]))
        validate(options)
        config = hosted_model_config(options.model, prompt_cache_mb=options.prompt_cache_mb,
                                     prompt_cache_dir=options.prompt_cache_dir)
        return LlamaServerConfig.from_json(config.to_json()).prompt_cache_dir  # what the child receives

    data = tmp_path / "data"
    assert folder_of("--data-dir", str(data)) is None  # off by default
    assert folder_of("--data-dir", str(data), "--prompt-cache-dir") == data / PROMPT_CACHE_RELATIVE_PATH
    assert folder_of("--session-only", "--prompt-cache-dir", str(tmp_path / "c")) == tmp_path / "c"
    with pytest.raises(InvalidArgumentError, match="needs --data-dir"):
        folder_of("--session-only", "--prompt-cache-dir")
    # Issue 22: the default folder under the data folder must not lead out of it through a link.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "CoreAI").mkdir(parents=True)
    (data / "CoreAI" / "runtime").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InvalidArgumentError, match="'runtime' is a link"):
        folder_of("--data-dir", str(data), "--prompt-cache-dir")
    assert list(elsewhere.iterdir()) == []
    (data / "CoreAI" / "runtime").unlink()
    with pytest.raises(InvalidArgumentError, match="--prompt-cache-mb 0 turns it off"):
        folder_of("--session-only", "--prompt-cache-dir", str(tmp_path), "--prompt-cache-mb", "0")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        folder_of("--session-only", "--prompt-cache-dir", str(tmp_path / "file"))


def test_the_model_child_returns_freed_state_copies_to_the_os(tiny_model_path, monkeypatch):
    # A fixed glibc mmap threshold in the child (RSS 767 vs 950 MB after 100 turns with the prompt cache);
    # a value the game set itself wins. Reads the child's environment from /proc (Linux, as CI).
    from pyruntime.model.hosting import MALLOC_MMAP_THRESHOLD_BYTES, MALLOC_MMAP_THRESHOLD_ENV

    def child_env() -> dict[str, str]:
        server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), api_key="k"))
        server.start(timeout=60)
        try:
            raw = Path(f"/proc/{server.pid}/environ").read_bytes()
        finally:
            server.stop()
        return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)

    monkeypatch.delenv(MALLOC_MMAP_THRESHOLD_ENV, raising=False)
    assert child_env()[MALLOC_MMAP_THRESHOLD_ENV] == MALLOC_MMAP_THRESHOLD_BYTES
    monkeypatch.setenv(MALLOC_MMAP_THRESHOLD_ENV, "65536")
    assert child_env()[MALLOC_MMAP_THRESHOLD_ENV] == "65536"
