"""`RuntimeSettings`: what one runtime is to be, typed (`serve`'s flags, the chat's options); `pyruntime/app.py`
builds the runtime from it.

Plain values only: reading settings starts nothing and loads neither the turn engine nor the RPC servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyruntime.catalog.pull import ModelPull
from pyruntime.errors import InvalidArgumentError
from pyruntime.llm_key import LLM_API_KEY_ENV, read_llm_api_key
from pyruntime.model.hosting.llama_server import DEFAULT_HOST, DEFAULT_PORT
from pyruntime.net.limits import TransportLimits
from pyruntime.policy import RoleMemoryConfig
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT
from pyruntime.rpc.grpc_server import DEFAULT_GRPC_PORT
from pyruntime.service.admission import DEFAULT_MAX_QUEUED, DEFAULT_MAX_TURNS_PER_CONVERSATION
from pyruntime.stores.in_memory import DEFAULT_CHAT_CAP, DEFAULT_TRANSCRIPT_CAP
from pyruntime.stores.persistence import DATA_FOLDER
from pyruntime.turns.rounds.modes import ToolCallMode
from pyruntime.turns.writer.decision import MemoryDesign

DEFAULT_GRACE_S = 5.0


@dataclass(frozen=True)
class RuntimeSettings:
    """What one runtime is to be: its model, stores, RPC ports and turn settings (`serve`'s flags, typed)."""

    model: Path | None = None
    llm_url: str | None = None
    no_model: bool = False
    scripted_model: Path | None = None  # a script file: serve the scripted model (pyruntime/testing/scripted.py)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    ctx: int | None = None
    data_dir: Path | None = None
    store: str | None = None  # a postgresql:// URL: saves in that database instead of files (headless servers)
    session_only: bool = False
    listen: str = DEFAULT_HOST
    grpc_port: int = DEFAULT_GRPC_PORT
    connect_port: int = DEFAULT_CONNECT_PORT
    token_file: Path | None = None
    tls_cert: Path | None = None  # with tls_key: both RPC ports speak TLS (required beyond loopback)
    tls_key: Path | None = None
    token: str | None = field(default=None, repr=False)  # None: $COREAI_RUNTIME_TOKEN, else generated (never a flag)
    limits: TransportLimits = TransportLimits()  # the RPC ports' connection, size and time limits
    grace: float = DEFAULT_GRACE_S
    chat_history_cap: int = DEFAULT_CHAT_CAP
    transcript_cap: int = DEFAULT_TRANSCRIPT_CAP
    tool_mode: ToolCallMode | None = None
    memory_design: MemoryDesign | None = None  # None: the factory's model profile decides
    prewarm: bool | None = None  # None: on for a hosted model, off for --llm-url (the factory's default)
    parent_pid: int | None = None
    exit_on_stdin_eof: bool = False
    threads: int | None = None  # None: default_threads() (half the cores, at least 1)
    n_gpu_layers: int = 0  # layers of the hosted model on the GPU; 0: CPU only, -1: all
    prompt_cache_mb: int | None = None  # room for cold conversations' parked states; 0: off, None: by model size
    prompt_cache_dir: Path | None = None  # the slots' states saved there at a stop, restored at start; None: off
    slots: int | None = None  # parallel slots of the hosted engine; None: DEFAULT_SLOTS
    llm_api_key_file: Path | None = None  # the --llm-url server's key, in a file
    llm_headers: tuple[str, ...] = ()  # extra "Name: value" headers for the --llm-url server
    llm_concurrency: int | None = None  # model calls sent to the --llm-url server at once; None: asked, else 64
    max_turns_running: int | None = None  # turns run at once; None: as many as the model serves calls at once
    max_turns_queued: int = DEFAULT_MAX_QUEUED  # turns that wait for a place beyond those (0: refused at once)
    max_turns_per_conversation: int = DEFAULT_MAX_TURNS_PER_CONVERSATION  # running and waiting, per conversation
    models_dir: Path | None = None  # where `--model NAME` is looked up (None: <data-dir>/CoreAI/models, per-user cache)
    model_pull: ModelPull | None = None  # `--model NAME` of a catalogue model not pulled yet: downloaded first
    api_key: str | None = None  # the --llm-url server's key itself (chat's --api-key; serve reads it from a file)
    rpc: bool = True  # serve the gRPC and Connect ports; False: turns in this process only (the terminal chat)
    check_llm_url: bool = True  # ask the --llm-url server for its models at start; False: the first turn tells
    turn_timeout: float | None = None  # seconds a turn may take unless its request says; None: the engine's default
    roles: tuple[RoleMemoryConfig, ...] = ()  # registered in the role policy before anything is served (--role-config)

    @property
    def hosts_model(self) -> bool:
        """True when serve runs llama.cpp itself (neither --llm-url nor --no-model)."""
        return self.llm_url is None and not self.no_model and self.scripted_model is None

    def turn_choices(self) -> dict[str, Any]:
        """The turn settings these flags choose, as `build_orchestrator` keywords (`TurnSettings` fields): a flag left
        unset leaves the setting to the model profile (None) or to the engine's default (absent)."""
        choices: dict[str, Any] = {"tool_mode": self.tool_mode, "memory_design": self.memory_design,
                                   "prewarm": self.prewarm}
        if self.turn_timeout is not None:
            choices["default_timeout"] = self.turn_timeout
        return choices

    @property
    def token_root(self) -> Path | None:
        """The data folder the token file is in (its default place, `<data-dir>/CoreAI/runtime/`): nothing below it
        is followed through a link. A --token-file the user named is written where it says."""
        if self.token_file is not None or self.data_dir is None:
            return None
        return Path(self.data_dir) / DATA_FOLDER


def llm_headers(settings: RuntimeSettings) -> dict[str, str]:
    """The --llm-header values as headers; InvalidArgumentError for one that is not `Name: value`."""
    headers: dict[str, str] = {}
    for raw in settings.llm_headers:
        name, sep, value = raw.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or any(c in name for c in " \t()<>@,;:\\\"/[]?={}") or not name.isascii():
            raise InvalidArgumentError('--llm-header must be "Name: value"')
        if any(c in raw for c in "\r\n\0") or not value.isprintable():
            raise InvalidArgumentError("--llm-header must be one printable line")
        if name.lower() == "authorization":
            raise InvalidArgumentError("--llm-header cannot carry the key: use --llm-api-key-file or "
                                       f"${LLM_API_KEY_ENV}")
        headers[name] = value
    return headers


def llm_api_key(settings: RuntimeSettings) -> str | None:
    """The --llm-url server's key: the one given, else --llm-api-key-file, else $COREAI_LLM_API_KEY, else None
    (never logged)."""
    return settings.api_key or read_llm_api_key(settings.llm_api_key_file)
