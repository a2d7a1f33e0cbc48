"""pyruntime: the agent-memory runtime (memory tool, versions, stores, history, turns, model hosting)."""

__version__ = "0.1.0"
