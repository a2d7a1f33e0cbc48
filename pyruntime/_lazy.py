"""Package exports that import their module on first use (PEP 562).

A package `__init__` that imports its heavy submodules eagerly makes every `import pyruntime.x.leaf`
pay for them: `pyruntime.client` would import the RPC servers (uvicorn), the metrics (Prometheus) and
the turn engine, and so need the hosted runtime's extra. With `lazy_exports` a name is imported when
it is first read; the names stay listed in the package (and, under TYPE_CHECKING, imported for type
checkers and editors).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name of `exports` comes from the module it maps to."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later reads skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
