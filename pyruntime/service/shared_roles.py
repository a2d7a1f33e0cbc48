"""Role configs shared by the runtimes of one PostgreSQL database: what ConfigureRole sets on one, all of them hold.

Behind a load balancer ConfigureRole reaches one runtime, and the turns of a role go to every runtime; a runtime
that starts (or restarts) later must know the roles too. So on the PostgreSQL store a configured role is
stored (`coreai_roles`, as the contract's `RoleMemoryConfig` bytes) before it is set here, and every runtime
follows the table (`pyruntime/stores/postgres_roles.py`): it reads every role at start, then each as it changes,
milliseconds after the commit. File and memory stores belong to one runtime: nothing is shared there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from coreai.v1 import common_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig, config_from_proto, config_to_proto
from pyruntime.stores import StoreBundle

if TYPE_CHECKING:
    from pyruntime.stores.postgres_db import PostgresDatabase

logger = logging.getLogger(__name__)

START_WAIT_S = 10.0  # how long a start waits for the stored roles before serving without them (they follow)


class SharedRoles:
    """The role table of a database, applied to one runtime's policy."""

    def __init__(self, db: PostgresDatabase, policy: AgentMemoryPolicy) -> None:
        from pyruntime.stores.postgres_roles import PostgresRoleTable, RoleFollower  # the server extra's modules

        self._policy = policy
        self._table = PostgresRoleTable(db)
        self._follower = RoleFollower(db, self._apply)

    def start(self, timeout: float = START_WAIT_S) -> None:
        """Apply the stored roles, then follow their changes (blocking until the first read, at most timeout)."""
        self._follower.start(timeout)

    def publish(self, config: RoleMemoryConfig) -> None:
        """Store a configured role for every runtime (PersistenceError: stored nowhere); blocking."""
        self._table.save(config.role_id, config_to_proto(config).SerializeToString())

    def close(self) -> None:
        """Stop following."""
        self._follower.close()

    def _apply(self, role_id: str, data: bytes) -> None:
        try:
            self._policy.set(config_from_proto(common_pb2.RoleMemoryConfig.FromString(data)))
        except (DecodeError, InvalidArgumentError, ValueError):
            logger.warning("Skipping an unreadable shared role config (%d bytes)", len(data))


def shared_roles(stores: StoreBundle, policy: AgentMemoryPolicy) -> SharedRoles | None:
    """The shared roles of a PostgreSQL store bundle; None for stores only this runtime uses."""
    from pyruntime.stores.postgres import PostgresAgentMemoryStore

    memory = stores.memory
    if not isinstance(memory, PostgresAgentMemoryStore):
        return None
    return SharedRoles(memory.db, policy)
