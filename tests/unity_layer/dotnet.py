"""Build the Unity package's assemblies with mcs and load them into this process through pythonnet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.build_csharp import DEFAULT_OUT, build  # noqa: E402

_loaded: set[str] = set()


def start_mono() -> None:
    """Start Mono once per process (preemptive suspend avoids the GC/GIL deadlock)."""
    os.environ["MONO_THREADS_SUSPEND"] = "preemptive"
    import pythonnet

    if pythonnet.get_runtime_info() is None:
        pythonnet.load("mono")


def load_assemblies(*targets: str) -> Path:
    """Build `targets` (core, unity, editor) and reference every assembly built; returns the build dir."""
    built = build(targets or ("all",))
    start_mono()
    import clr

    for dll in [*sorted(DEFAULT_OUT.glob("Unity*.dll")), *built]:
        if dll.name not in _loaded:
            clr.AddReference(str(dll))
            _loaded.add(dll.name)
    return DEFAULT_OUT
