"""The bound of synchronous store calls (RuntimeAgentMemoryStore.DefaultSynchronousCallTimeout) in the C# tests.

The product's default is 2 s; the tests raise it, since eight engineers share the machine. The default is
remembered first, whichever test folder loads the assemblies first, so its own test can check it.
"""

from __future__ import annotations

from typing import Any

_built_in: dict[str, Any] = {}


def raise_for_a_shared_machine() -> None:
    """Remember the built-in default, then give synchronous store calls 60 s."""
    from CoreAI.Ai import RuntimeAgentMemoryStore
    from System import TimeSpan

    _built_in.setdefault("default", RuntimeAgentMemoryStore.DefaultSynchronousCallTimeout)
    RuntimeAgentMemoryStore.DefaultSynchronousCallTimeout = TimeSpan.FromSeconds(60)


def built_in_default() -> Any:
    """The product's default, as it was before any test changed it (a System.TimeSpan)."""
    return _built_in["default"]
