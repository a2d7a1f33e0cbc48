"""`RuntimeThread`: the runtime `serve` runs (`pyruntime.app.Runtime`), started in the test's process on its own
event loop thread, so a blocking test can call it over real sockets while it runs.

Everything is built by the Runtime from its settings, as for `serve`; what a test holds (its stores, a model it
started and shares between tests, an in-process model double, turn limits, an observing turn runner) is handed
to the Runtime's constructor, never patched in afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pyruntime.app import Runtime
from pyruntime.rpc.runtime import ServedEndpoints

if TYPE_CHECKING:
    from pyruntime.service import RuntimeServices
    from pyruntime.turns import AiOrchestrator

T = TypeVar("T")
START_TIMEOUT_S = 120.0  # a start that hosts nothing takes well under a second; the machine is shared


class RuntimeThread(ServedEndpoints):
    """A started `Runtime` on a background event loop; `stop()` stops it in reverse (idempotent); its token, ports
    and addresses as `start_rpc_servers`' handle gives them (`ServedEndpoints`)."""

    def __init__(self, runtime: Runtime) -> None:
        """Start `runtime` (raises what its start raised, after unwinding it)."""
        self.runtime = runtime
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="coreai-runtime", daemon=True)
        self._thread.start()
        self._stopped = False
        try:
            self.ready: dict[str, Any] = self.call(runtime.start(), START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        if runtime.servers is not None:  # started with `rpc` on: what ServedEndpoints reads
            self.servers = runtime.servers

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the runtime's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the runtime (its servers, services and turns) runs on."""
        return self._loop

    @property
    def services(self) -> RuntimeServices:
        """The services the RPC servers serve."""
        assert self.runtime.services is not None
        return self.runtime.services

    @property
    def orchestrator(self) -> AiOrchestrator:
        """The turn engine (the runtime has a model)."""
        assert self.runtime.orchestrator is not None
        return self.runtime.orchestrator

    def stop(self, grace: float | None = None) -> None:
        """Stop the runtime (in-flight calls get `grace` seconds, else the settings'), then its loop."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.call(self.runtime.stop(grace))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
