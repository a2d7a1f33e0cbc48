"""What the transports and the client share: the method-name mapping and the refusal text."""

from __future__ import annotations

UNAUTHENTICATED_MESSAGE = "missing or wrong bearer token (send 'authorization: Bearer <token>')"


def python_method_name(rpc_name: str) -> str:
    """The service's method name of an RPC: `ApplyMemoryTool` -> `apply_memory_tool`."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in rpc_name).lstrip("_")
