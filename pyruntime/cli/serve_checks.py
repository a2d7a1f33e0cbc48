"""`coreai-runtime serve`'s checks: bad settings are refused before anything starts, with an error naming the flag.

Every check reads the `RuntimeSettings` the flags made and nothing else is touched (a folder is looked at, never
created), so a launcher gets exit 2 and the reason before a port is bound or a model loaded.
"""

from __future__ import annotations

from pathlib import Path

from pyruntime.app import RuntimeSettings, llm_api_key, llm_headers
from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client.concurrency import MAX_CONCURRENCY
from pyruntime.model.hosting.llama_server import MAX_SLOTS
from pyruntime.net.auth import is_loopback_host, resolve_token
from pyruntime.rpc.tls import check_listen, tls_files
from pyruntime.service.admission import MAX_LIMIT
from pyruntime.stores import confined
from pyruntime.stores.persistence import DATA_FOLDER
from pyruntime.testing.scripted import Script


def validate(options: RuntimeSettings) -> None:
    """Refuse bad flags before anything starts (InvalidArgumentError naming the flag)."""
    if options.store is not None:
        from pyruntime.stores.postgres import is_database_url

        if not is_database_url(options.store):
            raise InvalidArgumentError("--store must be a postgresql:// URL")
        if options.session_only:
            raise InvalidArgumentError("--store and --session-only exclude each other")
    if options.data_dir is None and not options.session_only and options.store is None:
        raise InvalidArgumentError(
            "--data-dir is required (the game's persistentDataPath, where saves live); "
            "pass --session-only to keep everything in memory instead")
    if options.data_dir is not None and options.data_dir.exists() and not options.data_dir.is_dir():
        raise InvalidArgumentError("--data-dir exists but is not a directory")
    if options.llm_url is not None and not options.llm_url.startswith(("http://", "https://")):
        raise InvalidArgumentError("--llm-url must be an http:// or https:// URL")
    if options.llm_url is None and (options.llm_api_key_file is not None or options.llm_headers
                                    or options.llm_concurrency is not None):
        raise InvalidArgumentError("--llm-api-key-file, --llm-header and --llm-concurrency are for an --llm-url "
                                   "server")
    if options.llm_concurrency is not None and not 1 <= options.llm_concurrency <= MAX_CONCURRENCY:
        raise InvalidArgumentError(f"--llm-concurrency must be within 1..{MAX_CONCURRENCY}, got "
                                   f"{options.llm_concurrency}")
    if options.llm_url is not None:
        llm_headers(options)
        llm_api_key(options)
    if options.slots is not None and not 1 <= options.slots <= MAX_SLOTS:
        raise InvalidArgumentError(f"--slots must be within 1..{MAX_SLOTS}, got {options.slots}")
    if options.scripted_model is not None:
        Script.load(options.scripted_model)  # a bad script is a usage error naming its field, before anything starts
    if options.model is not None and options.model.suffix.lower() != ".gguf":
        raise InvalidArgumentError("--model must be a .gguf file or a model name")
    if options.hosts_model and not 0 < options.port <= 65535:
        raise InvalidArgumentError(f"--port must be within 1..65535, got {options.port}")
    for flag, port in (("--grpc-port", options.grpc_port), ("--connect-port", options.connect_port)):
        if not 0 <= port <= 65535:
            raise InvalidArgumentError(f"{flag} must be within 0..65535 (0 = any free port), got {port}")
    ports = [options.grpc_port, options.connect_port] + ([options.port] if options.hosts_model else [])
    fixed = [p for p in ports if p != 0]
    if len(set(fixed)) != len(fixed):
        raise InvalidArgumentError("--port, --grpc-port and --connect-port must differ")
    for flag, value, least in (("--max-turns-running", options.max_turns_running, 1),
                               ("--max-turns-queued", options.max_turns_queued, 0),
                               ("--max-turns-per-conversation", options.max_turns_per_conversation, 1)):
        if value is not None and not least <= value <= MAX_LIMIT:
            raise InvalidArgumentError(f"{flag} must be within {least}..{MAX_LIMIT}, got {value}")
    if options.grace < 0:
        raise InvalidArgumentError("--grace must be >= 0 seconds")
    if options.threads is not None and options.threads < 1:
        raise InvalidArgumentError(f"--threads must be at least 1, got {options.threads}")
    if options.n_gpu_layers < -1:
        raise InvalidArgumentError(f"--n-gpu-layers must be -1 (all), 0 (CPU) or more, got {options.n_gpu_layers}")
    if options.parent_pid is not None and options.parent_pid <= 0:
        raise InvalidArgumentError(f"--parent-pid must be a process id (> 0), got {options.parent_pid}")
    if options.prompt_cache_dir is not None and options.prompt_cache_dir.exists() and \
            not options.prompt_cache_dir.is_dir():
        raise InvalidArgumentError("--prompt-cache-dir exists but is not a directory")
    _check_prompt_cache_folder(options)
    if options.chat_history_cap < 1 or options.transcript_cap < 1:
        raise InvalidArgumentError("--chat-history-cap and --transcript-cap must be at least 1")
    if not is_loopback_host(options.host):
        raise InvalidArgumentError(f"--host must be loopback (the model port has no TLS), got {options.host}")
    _, given = resolve_token()  # also refuses a malformed $COREAI_RUNTIME_TOKEN
    tls = tls_files(options.tls_cert, options.tls_key)
    check_listen(options.listen, token_given=given, tls=tls)
    if tls is not None:
        tls.check()


def _check_prompt_cache_folder(options: RuntimeSettings) -> None:
    """A prompt cache inside the data folder (`<data-dir>/CoreAI/runtime/prompt-cache`) must not go through a link:
    the model child writes and removes state files there."""
    if options.prompt_cache_dir is None or options.data_dir is None:
        return
    root = Path(options.data_dir) / DATA_FOLDER
    if root not in Path(options.prompt_cache_dir).parents:
        return
    try:
        with confined.open_folder(Path(options.prompt_cache_dir), root):
            pass
    except FileNotFoundError:
        pass  # created on first use
    except confined.UnsafeSaveError as exc:
        raise InvalidArgumentError(f"--prompt-cache-dir: {exc}") from None
