"""The memory state of one key and its version snapshots (contract §2). Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

DEFAULT_MAX_MEMORY_VERSIONS = 30


@dataclass(frozen=True)
class MemoryVersion:
    """One retained snapshot: what the document was after a successful, changing mutation."""

    version: int
    timestamp: int  # Unix seconds, UTC
    action: str
    content_after: str
    note: str


@dataclass(frozen=True)
class AgentMemoryState:
    """The canonical memory document of one key, with prompt snapshot and versions."""

    memory: str = ""
    last_system_prompt: str = ""
    system_prompt_memory_snapshot: str = ""
    system_prompt_memory_version: int = 0
    max_memory_versions: int = DEFAULT_MAX_MEMORY_VERSIONS
    versions: tuple[MemoryVersion, ...] = field(default_factory=tuple)

    @property
    def effective_max_versions(self) -> int:
        """max_memory_versions, where values < 1 mean the default 30."""
        return self.max_memory_versions if self.max_memory_versions >= 1 else DEFAULT_MAX_MEMORY_VERSIONS

    @property
    def latest_version(self) -> int:
        """The newest version number, 0 if none."""
        return max((v.version for v in self.versions), default=0)

    def evolve(self, **changes: object) -> AgentMemoryState:
        """A copy with the given fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]
