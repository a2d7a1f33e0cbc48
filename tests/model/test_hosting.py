"""Hosting llama.cpp's llama-server in a child process: start, answer, settings, stop, bad input."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.hosting.engine_place import port_is_free
from pyruntime.model.hosting.llama_server import (
    SMALL_MODEL_MAX_BYTES,
    SMALL_MODEL_PROMPT_CACHE_MB,
    LlamaServerConfig,
    effective_n_ctx,
)
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config
from tests.support.fixtures import free_port
from tests.support.tiny_model import TINY_CONTEXT_LENGTH, TINY_MODEL_ALIAS

ROOT = Path(__file__).resolve().parents[2]


def test_server_lists_the_alias_and_never_the_file_path(tiny_llama_server, tiny_model_path):
    models = httpx.get(f"{tiny_llama_server.base_url}/models").json()
    assert [m["id"] for m in models["data"]] == [TINY_MODEL_ALIAS]
    # A request without `model` must not echo the file path: llama-server names the --alias.
    reply = httpx.post(
        f"{tiny_llama_server.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    assert reply.status_code == 200
    assert reply.json()["model"] == TINY_MODEL_ALIAS
    assert str(tiny_model_path) not in reply.text and tiny_model_path.name not in reply.text


def test_context_defaults_to_8192_clamped_to_the_trained_context(tiny_llama_server):
    assert tiny_llama_server.config.n_ctx == TINY_CONTEXT_LENGTH  # 8192 asked, the model knows 2048
    # Each slot holds one conversation of n_ctx tokens (llama-server splits -c over the slots).
    slots = tiny_llama_server.status()["slots"]
    assert len(slots) == tiny_llama_server.config.slots and {s["n_ctx"] for s in slots} == {TINY_CONTEXT_LENGTH}
    # Half the cores, at least one: llama.cpp must leave cores to the game.
    assert hosted_model_config(None).n_threads == max(1, len(os.sched_getaffinity(0)) // 2)
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


def test_a_model_that_fails_to_load_leaves_the_runtime_able_to_load_another(tiny_model_path, tmp_path):
    # Nothing of the failed start stays behind (no process, no bound port, no private folder): the same
    # process hosts the next model on the same port at once.
    from tests.support.tiny_model import write_tiny_model

    broken = tmp_path / "broken.gguf"
    good = write_tiny_model(tmp_path / "good.gguf").read_bytes()
    broken.write_bytes(good[: len(good) // 2])  # a header llama.cpp reads, tensors it cannot: the engine exits
    port = free_port()
    failed = LlamaServerProcess(LlamaServerConfig(model_path=broken, alias="t", port=port, n_threads=1))
    with pytest.raises(ModelUnavailableError):
        failed.start(timeout=60)
    assert not failed.is_alive() and failed._private is None and port_is_free("127.0.0.1", port)
    loaded = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias="t", port=port, n_threads=1))
    loaded.start(timeout=60)
    try:
        assert httpx.get(f"{loaded.base_url}/models", timeout=10).status_code == 200
    finally:
        loaded.stop()


@pytest.mark.parametrize("kind", ["pdeathsig", "keeper"])
def test_the_child_exits_when_its_parent_dies(tiny_model_path, tmp_path, kind):
    # pdeathsig: Linux with util-linux's setpriv (the kernel kills the engine); keeper: macOS, or Linux without
    # setpriv (a small Python process watches the runtime). Either way no llama-server outlives a SIGKILLed runtime.
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        import pyruntime.model.hosting.lifeline as lifeline
        lifeline.lifeline_kind = lambda: {kind!r}
        from pyruntime.model.hosting.process import LlamaServerProcess
        from pyruntime.model.hosting.llama_server import LlamaServerConfig
        config = LlamaServerConfig(model_path=Path({str(tiny_model_path)!r}), alias="t", port={free_port()},
                                   n_threads=1)
        s = LlamaServerProcess(config)
        s.start(timeout=60)
        Path({str(pid_file)!r}).write_text(str(s.pid))
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        # Until the pid is in the file: it exists a moment before write_text has written it.
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline \
                and parent.poll() is None:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        engines = [child, *_children(child)]  # the keeper's llama-server too
        assert any(Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].endswith(b"llama-server") for p in engines)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(p) for p in engines):
        time.sleep(0.1)
    assert not any(_running(p) for p in engines)


def _children(pid: int) -> list[int]:
    from tests.unity_layer.processes import children

    return children(pid)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_the_command_line_carries_the_settings_and_never_the_key(tiny_model_path, tmp_path):
    from pyruntime.model.hosting.llama_server import EngineLaunch, server_command

    config = LlamaServerConfig(model_path=tiny_model_path, alias="a", port=1234, n_ctx=512, slots=3, n_threads=2,
                               prompt_cache_mb=64, prompt_cache_dir=tmp_path, api_key="public-key")
    launch = EngineLaunch(listen=str(tmp_path / "engine.sock"), port=0, key_file=tmp_path / "key", n_gpu_layers=-1)
    argv = server_command(Path("/bin/llama-server"), config, launch)
    flags = {flag: value for flag, value in pairwise(argv) if flag.startswith("--")}
    assert flags["--ctx-size"] == "1536" and flags["--parallel"] == "3"  # 512 tokens in each of 3 slots
    assert flags["--threads"] == "2" and flags["--n-gpu-layers"] == "auto" and flags["--flash-attn"] == "auto"
    assert flags["--cache-ram"] == "0"  # llama-server's content-addressed host cache is off: states are parked per
    # conversation by the runtime, within prompt_cache_mb (model/client/parked_states.py)
    assert flags["--api-key-file"] == str(tmp_path / "key") and flags["--slot-save-path"] == str(tmp_path)
    assert flags["--host"].endswith(".sock") and "public-key" not in " ".join(argv)
    assert "--no-ui" in argv and "--api-key" not in argv


def test_the_engine_listens_only_where_the_runtime_reaches_it_and_demands_its_own_key(tiny_llama_server):
    # The model port is ours (guarded); llama-server itself is on a Unix socket in a private folder.
    launch = tiny_llama_server._launch
    assert launch is not None and launch.listen.endswith(".sock")
    folder = Path(launch.listen).parent
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not launch.key_file.exists()  # read by llama-server at startup, then removed
    argv = Path(f"/proc/{tiny_llama_server.pid}/cmdline").read_bytes().decode().split("\0")
    assert tiny_llama_server._engine_key not in " ".join(argv)
    transport = httpx.HTTPTransport(uds=launch.listen)
    with httpx.Client(transport=transport, base_url="http://engine", timeout=10) as direct:
        assert direct.get("/v1/models").status_code == 401  # no key: refused
        assert direct.get("/v1/models", headers=tiny_llama_server.engine_headers).status_code == 200
    environ = Path(f"/proc/{tiny_llama_server.pid}/environ").read_bytes().decode()
    assert "LLAMA_ARG_" not in environ and tiny_llama_server._engine_key not in environ


def test_llama_server_variables_of_the_game_do_not_reach_the_engine(tiny_model_path, monkeypatch):
    # llama-server reads LLAMA_ARG_* as flags (a log folder for prompts, a public host, another key).
    monkeypatch.setenv("LLAMA_ARG_HOST", "0.0.0.0")
    monkeypatch.setenv("LLAMA_API_KEY", "guessable")
    server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), api_key="k", n_threads=1))
    server.start(timeout=60)
    try:
        raw = Path(f"/proc/{server.pid}/environ").read_bytes().decode()
        assert "LLAMA_ARG_HOST" not in raw and "LLAMA_API_KEY" not in raw
        assert server._launch is not None
        with httpx.Client(transport=httpx.HTTPTransport(uds=server._launch.listen), base_url="http://e") as direct:
            assert direct.get("/v1/models", headers={"Authorization": "Bearer guessable"}).status_code == 401
    finally:
        server.stop()


def test_a_missing_binary_is_a_clear_error_naming_the_bootstrap(tiny_model_path, tmp_path, monkeypatch):
    from pyruntime.model.hosting.llama_server import BOOTSTRAP_COMMAND, LLAMA_SERVER_ENV, find_llama_server

    monkeypatch.setenv(LLAMA_SERVER_ENV, str(tmp_path / "nothing-here"))
    with pytest.raises(ModelUnavailableError, match=LLAMA_SERVER_ENV):
        find_llama_server()
    monkeypatch.delenv(LLAMA_SERVER_ENV)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sysconfig.get_path", lambda name: str(tmp_path))
    with pytest.raises(ModelUnavailableError, match=BOOTSTRAP_COMMAND):
        find_llama_server()
    server = LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias="t", port=free_port()))
    with pytest.raises(ModelUnavailableError, match="not installed"):
        server.start()
    assert server.pid is None and port_is_free("127.0.0.1", server.config.port)


def test_the_binary_is_found_in_the_documented_order(tmp_path, monkeypatch):
    from pyruntime.model.hosting.llama_server import LLAMA_SERVER_ENV, binary_name, find_llama_server

    scripts, on_path, explicit = tmp_path / "scripts", tmp_path / "path", tmp_path / "explicit"
    for folder in (scripts, on_path, explicit):
        folder.mkdir()
        (folder / binary_name()).write_text("#!/bin/sh\n")
        (folder / binary_name()).chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setattr("sysconfig.get_path", lambda name: str(scripts))
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(explicit / binary_name()))
    assert find_llama_server() == explicit / binary_name()
    monkeypatch.delenv(LLAMA_SERVER_ENV)
    assert find_llama_server() == scripts / binary_name()
    (scripts / binary_name()).unlink()
    assert find_llama_server() == on_path / binary_name()
    frozen = tmp_path / "dist"
    frozen.mkdir()
    (frozen / binary_name()).write_text("")
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys.executable", str(frozen / "coreai-runtime"))
    assert find_llama_server() == frozen / binary_name()


def test_n_gpu_layers_flows_from_the_serve_flag_to_the_engines_command_line(tiny_model_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args

    args = build_parser().parse_args(["serve", "--model", str(tiny_model_path), "--n-gpu-layers", "-1"])
    options = options_from_args(args)
    assert hosted_model_config(options.model, n_gpu_layers=options.n_gpu_layers).n_gpu_layers == -1
    assert hosted_model_config(tiny_model_path).n_gpu_layers == 0  # default: CPU only


def test_n_gpu_layers_below_minus_one_is_refused(tiny_model_path):
    with pytest.raises(InvalidArgumentError, match="n_gpu_layers must be -1"):
        hosted_model_config(tiny_model_path, n_gpu_layers=-2)


def test_a_cpu_build_hosts_with_all_layers_asked_on_the_gpu_and_says_so(tiny_model_path):
    # This llama-server has no GPU backend: --n-gpu-layers -1 must still load and answer on the CPU,
    # and Health must say why the layers are not on a GPU (the failure users of GPU packages meet most).
    from pyruntime.service.model_memory import hosted_model_memory

    server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), n_gpu_layers=-1, api_key="k",
                                                    n_threads=1))
    server.start(timeout=60)
    try:
        reply = httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer k"}, timeout=10)
        assert reply.status_code == 200
        memory = hosted_model_memory(server)
        assert memory.gpu_layers == 0 and "no GPU backend" in memory.gpu_fallback_reason
    finally:
        server.stop()


def test_slots_and_the_prompt_cache_have_defaults_by_model_size(tiny_model_path, tmp_path):
    from pyruntime.model.hosting.llama_server import DEFAULT_SLOTS, LARGE_MODEL_PROMPT_CACHE_MB

    assert hosted_model_config(tiny_model_path).slots == DEFAULT_SLOTS
    assert hosted_model_config(tiny_model_path, slots=1).slots == 1
    with pytest.raises(InvalidArgumentError, match="slots"):
        hosted_model_config(tiny_model_path, slots=0)
    large = tmp_path / "large.gguf"
    with large.open("wb") as f:  # sparse: the size is what decides, nothing is read
        f.truncate(SMALL_MODEL_MAX_BYTES)
    assert hosted_model_config(large).prompt_cache_mb == LARGE_MODEL_PROMPT_CACHE_MB


def test_a_small_model_gets_a_small_prompt_cache_by_default(tiny_model_path, tmp_path):
    assert hosted_model_config(tiny_model_path).prompt_cache_mb == SMALL_MODEL_PROMPT_CACHE_MB
    assert hosted_model_config(None).prompt_cache_mb == SMALL_MODEL_PROMPT_CACHE_MB  # the embedded SmolLM2
    large = tmp_path / "large.gguf"
    with large.open("wb") as f:
        f.truncate(SMALL_MODEL_MAX_BYTES)
    assert hosted_model_config(large, prompt_cache_mb=64).prompt_cache_mb == 64
    assert hosted_model_config(tiny_model_path, prompt_cache_mb=0).prompt_cache_mb == 0  # off when asked


def test_the_serve_flag_decides_the_prompt_cache_and_its_absence_leaves_the_default(tiny_model_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args
    def cache_of(*flags: str) -> int:
        options = options_from_args(build_parser().parse_args(["serve", "--model", str(tiny_model_path), *flags]))
        return hosted_model_config(options.model, prompt_cache_mb=options.prompt_cache_mb).prompt_cache_mb

    assert cache_of() == SMALL_MODEL_PROMPT_CACHE_MB
    assert cache_of("--prompt-cache-mb", "0") == 0
    assert cache_of("--prompt-cache-mb", "32") == 32


def test_the_prompt_cache_folder_flows_from_the_serve_flag_to_the_child(tiny_model_path, tmp_path):
    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args
    from pyruntime.cli.serve_checks import validate
    from pyruntime.stores.engine_files import PROMPT_CACHE_RELATIVE_PATH

    def folder_of(*flags: str) -> Path | None:
        options = options_from_args(build_parser().parse_args(["serve", "--model", str(tiny_model_path), *flags]))
        validate(options)
        config = hosted_model_config(options.model, prompt_cache_mb=options.prompt_cache_mb,
                                     prompt_cache_dir=options.prompt_cache_dir)
        return config.prompt_cache_dir

    data = tmp_path / "data"
    assert folder_of("--data-dir", str(data)) is None  # off by default
    assert folder_of("--data-dir", str(data), "--prompt-cache-dir") == data / PROMPT_CACHE_RELATIVE_PATH
    assert folder_of("--session-only", "--prompt-cache-dir", str(tmp_path / "c")) == tmp_path / "c"
    with pytest.raises(InvalidArgumentError, match="needs --data-dir"):
        folder_of("--session-only", "--prompt-cache-dir")
    # The default folder under the data folder must not lead out of it through a link.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "CoreAI").mkdir(parents=True)
    (data / "CoreAI" / "runtime").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InvalidArgumentError, match="'runtime' is a link"):
        folder_of("--data-dir", str(data), "--prompt-cache-dir")
    assert list(elsewhere.iterdir()) == []
    (data / "CoreAI" / "runtime").unlink()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        folder_of("--session-only", "--prompt-cache-dir", str(tmp_path / "file"))


def test_the_model_child_returns_freed_state_copies_to_the_os(tiny_model_path, monkeypatch):
    # A fixed glibc mmap threshold in the child (freed prompt-cache state copies go back to the OS);
    # a value the game set itself wins. Reads the child's environment from /proc (Linux, as CI).
    from pyruntime.model.hosting.engine_place import MALLOC_MMAP_THRESHOLD_BYTES, MALLOC_MMAP_THRESHOLD_ENV

    def child_env() -> dict[str, str]:
        server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), api_key="k", n_threads=1))
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


def test_a_gpu_that_refuses_the_layers_falls_back_to_the_cpu_with_the_reason(tiny_model_path, tmp_path, monkeypatch):
    # No GPU here: the GPU's refusal is played by a script in front of the real llama-server that fails, with
    # CUDA's out-of-memory line, whenever layers are asked on the GPU, and runs the binary for `-ngl 0`.
    from pyruntime.model.hosting.llama_server import LLAMA_SERVER_ENV, find_llama_server
    from pyruntime.service.model_memory import hosted_model_memory

    real = find_llama_server()
    script = tmp_path / "llama-server"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --n-gpu-layers 0 "*) exec ' + str(real) + ' "$@";; esac\n'
        'echo "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 900.00 MiB on device 0: '
        'cudaMalloc failed: out of memory" >&2\n'
        "exit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(script))
    server = LlamaServerProcess(hosted_model_config(tiny_model_path, port=free_port(), n_gpu_layers=-1, api_key="k",
                                                    n_threads=1))
    server.start(timeout=60)
    try:
        memory = hosted_model_memory(server)
        assert server.is_alive() and memory.gpu_layers == 0
        assert memory.gpu_fallback_reason == "not enough GPU memory for the requested layers"
        reply = httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer k"}, timeout=10)
        assert reply.status_code == 200  # answering, on the CPU
    finally:
        server.stop()
