"""Read the few GGUF header values the runtime needs, without loading the model (pure Python)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pyruntime.errors import InvalidArgumentError

_MAGIC = b"GGUF"
# GGUF value type id -> struct format of a scalar (little endian).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING = 8
_ARRAY = 9


@dataclass(frozen=True)
class GGUFInfo:
    """What the runtime needs from a model file's header."""

    architecture: str
    context_length: int | None
    has_chat_template: bool
    size_bytes: int


def read_gguf_info(path: Path) -> GGUFInfo:
    """Read architecture, trained context length and template presence from a GGUF file's header."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgumentError("model file does not exist or is not a file")
    with path.open("rb") as f:
        values = _read_header(f, wanted_prefixes=("general.architecture", ".context_length", "tokenizer.chat_template"))
    arch = values.get("general.architecture")
    if not isinstance(arch, str):
        raise InvalidArgumentError("model file has no general.architecture; not a usable GGUF model")
    ctx = values.get(f"{arch}.context_length")
    return GGUFInfo(
        architecture=arch,
        context_length=int(ctx) if isinstance(ctx, int) and ctx > 0 else None,
        has_chat_template=isinstance(values.get("tokenizer.chat_template"), str),
        size_bytes=path.stat().st_size,
    )


def _read_header(f: IO[bytes], wanted_prefixes: tuple[str, ...]) -> dict[str, Any]:
    """Key/value pairs of the header whose key starts or ends with one of `wanted_prefixes`."""
    if f.read(4) != _MAGIC:
        raise InvalidArgumentError("model file is not a GGUF file (bad magic)")
    try:
        (version,) = struct.unpack("<I", f.read(4))
        if version < 2:
            raise InvalidArgumentError(f"GGUF version {version} is not supported (need 2 or later)")
        _tensor_count, kv_count = struct.unpack("<QQ", f.read(16))
        found: dict[str, Any] = {}
        for _ in range(kv_count):
            key = _read_string(f)
            (value_type,) = struct.unpack("<I", f.read(4))
            wanted = any(key.startswith(p) or key.endswith(p) for p in wanted_prefixes)
            value = _read_value(f, value_type, keep=wanted)
            if wanted:
                found[key] = value
        return found
    except struct.error as exc:
        raise InvalidArgumentError("model file is truncated or corrupt (GGUF header)") from exc


def _read_string(f: IO[bytes]) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode("utf-8", errors="replace")


def _read_value(f: IO[bytes], value_type: int, *, keep: bool) -> Any:
    if value_type in _SCALARS:
        fmt = _SCALARS[value_type]
        (value,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
        return value
    if value_type == _STRING:
        return _read_string(f)
    if value_type == _ARRAY:
        elem_type, count = struct.unpack("<IQ", f.read(12))
        if elem_type in _SCALARS and not keep:
            f.seek(count * struct.calcsize(_SCALARS[elem_type]), 1)  # skip big arrays (token scores) cheaply
            return None
        items = [_read_value(f, elem_type, keep=keep) for _ in range(count)]
        return items if keep else None
    raise InvalidArgumentError(f"model file has an unknown GGUF value type {value_type}")
