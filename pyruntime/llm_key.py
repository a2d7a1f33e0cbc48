"""The key of an external OpenAI-compatible server (`--llm-url`): from a file or the environment, never a flag value.

Command lines are visible to every user of the machine (`ps`), so `serve` and `chat` read the key from
`--llm-api-key-file` or `$COREAI_LLM_API_KEY`; it is never logged, and an error names where it came from,
never the key.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyruntime.errors import InvalidArgumentError

LLM_API_KEY_ENV = "COREAI_LLM_API_KEY"
MAX_KEY_FILE_BYTES = 4096


def read_llm_api_key(key_file: Path | None) -> str | None:
    """An external model server's key from `key_file`, else $COREAI_LLM_API_KEY, else None; InvalidArgumentError
    naming the source (never the key) when it cannot be one."""
    if key_file is not None:
        try:
            with key_file.open("rb") as file:
                raw = file.read(MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise InvalidArgumentError(f"--llm-api-key-file cannot be read ({exc.strerror or 'error'})") from None
        if len(raw) > MAX_KEY_FILE_BYTES:
            raise InvalidArgumentError("--llm-api-key-file is too large to be a key")
        key = raw.decode("utf-8", "replace").strip()
        source = "--llm-api-key-file"
    else:
        key = os.environ.get(LLM_API_KEY_ENV, "").strip()
        source = f"${LLM_API_KEY_ENV}"
        if not key:
            return None
    if not key or not key.isascii() or not key.isprintable() or " " in key:
        raise InvalidArgumentError(f"{source} must hold one key: printable ASCII without spaces")
    return key
