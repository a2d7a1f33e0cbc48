"""The model, by lifetime: the client the turns call it through (`model/client/`: HTTP and SSE, the `ModelClient`
seam, types, errors, the request queue), hosting and supervising llama.cpp's llama-server (`model/hosting/`), and
the guarded public model port (`model/public_port.py`). The client never imports the hosting.

The names below are imported on first use, so `import pyruntime.model.client.types` loads neither the HTTP client
nor the hosting. The values a model call returns (`ChatCompletion`, the stream deltas, `ToolCall`, `Usage`) are
not re-exported: they have one home, `pyruntime.model.client.types`, where every user imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyruntime._lazy import lazy_exports

if TYPE_CHECKING:
    from pyruntime.model.client.errors import (
        ContextOverflowError,
        IncompleteStreamError,
        ModelError,
        ModelStalledError,
        ModelUnavailableError,
    )
    from pyruntime.model.client.http import ChatStream, OpenAICompatClient
    from pyruntime.model.client.queue import ModelRequestQueue, Priority
    from pyruntime.model.client.seam import Gate, ModelClient, ModelStream
    from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
    from pyruntime.model.hosting.llama_server import LlamaServerConfig
    from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config
    from pyruntime.model.hosting.supervisor import ModelState, ModelSupervisor, WatchdogSettings

_CLIENT = "pyruntime.model.client"
_HOSTING = "pyruntime.model.hosting"
_EXPORTS = {
    **dict.fromkeys(("ContextOverflowError", "IncompleteStreamError", "ModelError", "ModelStalledError",
                     "ModelUnavailableError"), f"{_CLIENT}.errors"),
    **dict.fromkeys(("ChatStream", "OpenAICompatClient"), f"{_CLIENT}.http"),
    **dict.fromkeys(("ModelRequestQueue", "Priority"), f"{_CLIENT}.queue"),
    **dict.fromkeys(("Gate", "ModelClient", "ModelStream"), f"{_CLIENT}.seam"),
    **dict.fromkeys(("EMBEDDED_MODEL_ALIAS", "embedded_model_path"), f"{_HOSTING}.embedded"),
    "LlamaServerConfig": f"{_HOSTING}.llama_server",
    **dict.fromkeys(("LlamaServerProcess", "hosted_model_config"), f"{_HOSTING}.process"),
    **dict.fromkeys(("ModelState", "ModelSupervisor", "WatchdogSettings"), f"{_HOSTING}.supervisor"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "EMBEDDED_MODEL_ALIAS",
    "ChatStream",
    "ContextOverflowError",
    "Gate",
    "IncompleteStreamError",
    "LlamaServerConfig",
    "LlamaServerProcess",
    "ModelClient",
    "ModelError",
    "ModelRequestQueue",
    "ModelStalledError",
    "ModelStream",
    "ModelState",
    "ModelSupervisor",
    "ModelUnavailableError",
    "OpenAICompatClient",
    "Priority",
    "WatchdogSettings",
    "embedded_model_path",
    "hosted_model_config",
]
