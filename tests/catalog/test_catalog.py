"""The catalogue's entries are well-formed, say where their checksums come from, and the one verified here matches
the embedded model's file byte for byte; its file is checked field by field and ships in the wheel."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pyruntime.catalog import entries as catalog
from pyruntime.catalog.cache import PullRequest
from pyruntime.model.hosting.embedded import embedded_model_path
from tests.conftest import ROOT

ENTRY = """[[model]]
name = "tiny"
url = "https://example.invalid/tiny.gguf"
sha256 = "%s"
license = "MIT"
context_length = 2048
tool_mode = "structured"
memory_design = "writer"
description = "a test entry"
checksum_source = "not verified here: a test"
""" % ("0" * 64)


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


def test_the_catalogue_file_is_read_field_by_field_and_a_bad_field_is_named() -> None:
    (entry,) = catalog.parse_catalog(ENTRY)
    assert (entry.name, entry.context_length, entry.size_bytes) == ("tiny", 2048, None)
    assert catalog.parse_catalog(ENTRY + "size_bytes = 5\n")[0].size_bytes == 5
    for bad, named in [(ENTRY.replace('"structured"', '"grammar"'), "tool_mode"),
                       (ENTRY + "quantisation = 4\n", "quantisation"),
                       (ENTRY.replace('license = "MIT"\n', ""), "license"),
                       (ENTRY.replace('name = "tiny"', "name = 7"), "name")]:
        with pytest.raises(ValueError, match=named):
            catalog.parse_catalog(bad)


def test_the_wheel_carries_the_catalogue_and_every_other_data_file(tmp_path: Path) -> None:
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "pyruntime"]
    tracked = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    data = sorted(f for f in tracked if not f.endswith(".py"))
    assert "pyruntime/catalog/models.toml" in data
    source = tmp_path / "src"  # a copy: building in the checkout would leave build/ and *.egg-info there
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "THIRD_PARTY_NOTICES.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in ("pyruntime", "coreai"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=120)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert set(data) <= set(zipfile.ZipFile(wheel).namelist())
