"""The catalogue's entries are well-formed, say where their checksums come from, and the one verified here matches
the embedded model's file byte for byte."""

from __future__ import annotations

import hashlib
import re

from pyruntime.catalog import entries as catalog
from pyruntime.catalog.cache import PullRequest
from pyruntime.model.hosting.embedded import embedded_model_path


def test_every_entry_is_well_formed_and_names_its_checksum_source() -> None:
    names = [e.name for e in catalog.CATALOG]
    assert len(names) == len(set(names)) and "smollm2-135m" in names
    for entry in catalog.CATALOG:
        assert catalog.check_name(entry.name) == entry.name
        assert entry.url.startswith("https://") and entry.url.endswith(".gguf")
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
        assert entry.size_bytes is None or entry.size_bytes > 0
        assert entry.tool_mode in ("structured", "native") and entry.memory_design in ("writer", "tool")
        assert entry.checksum_source.startswith(("verified here", "not verified here"))
        assert entry.license and entry.context_length > 0


def test_the_smollm2_entry_is_the_embedded_models_file() -> None:
    entry = catalog.find("SmolLM2-135M")
    path = embedded_model_path()
    assert entry is not None and entry.size_bytes == path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == entry.sha256


def test_a_catalogue_name_pulls_its_url_with_its_checks() -> None:
    entry = catalog.find("llama3.2-1b")
    assert entry is not None
    request = PullRequest.of("llama3.2-1b")
    assert (request.url, request.sha256, request.source) == (entry.url, entry.sha256, "catalogue")
    url_request = PullRequest.of("https://host.example/files/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf?token=secret")
    assert url_request.name == "qwen2.5-0.5b-instruct-q4_k_m" and url_request.sha256 is None
