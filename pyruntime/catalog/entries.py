"""The catalogue of known-good GGUF models for NPCs, by name (`coreai-runtime models list`).

The entries are data: `models.toml` beside this module, with the honesty rule on where each checksum comes
from. They are read and checked once, at import (a malformed file fails the import, naming the field).
The Unity package carries the same entries, generated from them (tools/gen_catalog_csharp.py).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import ClassVar, Literal

from pydantic import ConfigDict, TypeAdapter

from pyruntime.errors import InvalidArgumentError

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CATALOG_FILE = "models.toml"


@dataclass(frozen=True)
class CatalogEntry:
    """One model the runtime knows by name."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    name: str
    url: str
    sha256: str
    license: str
    context_length: int  # trained context, from the model card
    tool_mode: Literal["structured", "native"]  # the tool-call mode it suits: grammar-constrained or native
    memory_design: Literal["writer", "tool"]  # a separate memory pass (for small models), or the memory tool
    description: str
    checksum_source: str  # where sha256 (and size) come from, and whether it was verified here
    size_bytes: int | None = field(default=None, kw_only=True)  # None: no verified source for the exact size

    @property
    def file_name(self) -> str:
        """The cached file's name: `<name>.gguf` (the hosted model's alias is then the name)."""
        return f"{self.name}.gguf"


def parse_catalog(text: str) -> tuple[CatalogEntry, ...]:
    """The entries of a catalogue file's text (`[[model]]` tables); raises ValueError naming a bad field."""
    tables = tomllib.loads(text).get("model", [])
    return tuple(TypeAdapter(list[CatalogEntry]).validate_python(tables))


CATALOG: tuple[CatalogEntry, ...] = parse_catalog(
    resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8"))


def find(name: str) -> CatalogEntry | None:
    """The catalogue entry called `name` (case-insensitive), or None."""
    wanted = name.strip().lower()
    return next((e for e in CATALOG if e.name == wanted), None)


def check_name(name: str) -> str:
    """`name` lowercased when it is a valid model name (what the cache files are called); raises otherwise."""
    lowered = name.strip().lower()
    if not _NAME.fullmatch(lowered) or lowered.endswith(".gguf"):
        raise InvalidArgumentError(
            "a model name is 1-64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit (not a path)")
    return lowered


def check_sha256(value: str) -> str:
    """A sha256 given by a user, lowercased; raises InvalidArgumentError when it is not 64 hex digits."""
    lowered = value.strip().lower()
    if not _SHA256.fullmatch(lowered):
        raise InvalidArgumentError("--sha256 must be 64 hexadecimal digits")
    return lowered
