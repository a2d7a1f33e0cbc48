"""The runtime's Prometheus metrics (text exposition format), one registry per runtime.

Counters are incremented where things happen (turns, refused connections); gauges read their
source at scrape time (turns in flight, open connections, model state), so a scrape never waits
on the model or a store lock. Labels carry statuses and transports only, never ids or text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_LATEST
MODEL_STATES = ("none", "loading", "ready", "restarting", "failed")

ModelSnapshot = Callable[[], tuple[str, int]]
"""(state, restarts so far) of the model host, read without blocking."""

MemorySnapshot = Callable[[], Any]
"""The model server's memory and slots now: an object with rss_bytes, prompt_cache_used_bytes,
prompt_cache_limit_bytes, prompt_cache_entries, slots, slots_busy (service/model_memory.ModelMemory)."""
"""(RSS, prompt cache used, prompt cache limit) of the model server in bytes, read without blocking."""

PrewarmSnapshot = Callable[[], tuple[int, int, int]]
"""(sent, skipped, failed) prewarms of next turns' prefixes so far (turns/between/prewarm.py)."""
PREWARM_OUTCOMES = ("sent", "skipped", "failed")


class _ModelCollector(Collector):
    """coreai_model_state{state} (1 for the current one), coreai_model_ready, coreai_model_restarts_total, and
    the model server's memory: coreai_model_rss_bytes, coreai_prompt_cache_used_bytes / _limit_bytes."""

    def __init__(self) -> None:
        self.source: ModelSnapshot | None = None
        self.memory: MemorySnapshot | None = None

    def collect(self) -> Iterable[Metric]:
        """The model host's state and memory as read now."""
        state, restarts = self.source() if self.source is not None else ("none", 0)
        states = GaugeMetricFamily("coreai_model_state", "The model host's state (1 = current)", labels=["state"])
        for name in MODEL_STATES:
            states.add_metric([name], 1.0 if name == state else 0.0)
        yield states
        yield GaugeMetricFamily("coreai_model_ready", "1 when the model answers turns", value=float(state == "ready"))
        yield CounterMetricFamily("coreai_model_restarts", "Times the model server was restarted", value=restarts)
        memory = self.memory() if self.memory is not None else None

        def read(name: str) -> float:
            return float(getattr(memory, name, 0) or 0)

        yield GaugeMetricFamily("coreai_model_rss_bytes", "The hosted model server's resident memory (0: unknown)",
                                value=read("rss_bytes"))
        yield GaugeMetricFamily("coreai_prompt_cache_used_bytes", "Model states the prompt cache holds",
                                value=read("prompt_cache_used_bytes"))
        yield GaugeMetricFamily("coreai_prompt_cache_limit_bytes", "The prompt cache's budget (0: off)",
                                value=read("prompt_cache_limit_bytes"))
        yield GaugeMetricFamily("coreai_prompt_cache_entries", "Conversation states the prompt cache holds",
                                value=read("prompt_cache_entries"))
        slots = GaugeMetricFamily("coreai_model_slots", "The hosted engine's parallel slots", labels=["state"])
        slots.add_metric(["busy"], read("slots_busy"))
        slots.add_metric(["idle"], max(0.0, read("slots") - read("slots_busy")))
        yield slots


class _PrewarmCollector(Collector):
    """coreai_prewarms_total{outcome}: next turns' prefixes evaluated in the background, skipped, failed."""

    def __init__(self) -> None:
        self.source: PrewarmSnapshot | None = None

    def collect(self) -> Iterable[Metric]:
        """The orchestrator's prewarm counts as read now."""
        counts = self.source() if self.source is not None else (0, 0, 0)
        family = CounterMetricFamily("coreai_prewarms", "Next turns' prompt prefixes evaluated behind player turns, "
                                     "by outcome (skipped: warm already or superseded)", labels=["outcome"])
        for outcome, value in zip(PREWARM_OUTCOMES, counts, strict=True):
            family.add_metric([outcome], value)
        yield family


AdmissionSnapshot = Callable[[], Any]
"""Turn admission now: an object with running, queued, in_flight, max_running, max_queued, max_per_conversation
(service/admission.AdmissionSnapshot)."""
FIRST_TOKEN_ADDED_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
                             0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
QUEUE_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _AdmissionCollector(Collector):
    """coreai_turns_in_flight, coreai_turns_running, coreai_turns_queued and coreai_turn_limit{limit}: turn
    admission as read now, all from one snapshot."""

    def __init__(self) -> None:
        self.source: AdmissionSnapshot | None = None

    def collect(self) -> Iterable[Metric]:
        """Admission's counts and limits as read now."""
        now = self.source() if self.source is not None else None

        def read(name: str) -> float:
            return float(getattr(now, name, 0) or 0)

        yield GaugeMetricFamily("coreai_turns_in_flight", "Turns admitted and not finished (queued or running)",
                                value=read("in_flight"))
        yield GaugeMetricFamily("coreai_turns_running", "Turns running now (holding a place)", value=read("running"))
        yield GaugeMetricFamily("coreai_turns_queued", "Turns waiting for a place (the queue's depth)",
                                value=read("queued"))
        limits = GaugeMetricFamily("coreai_turn_limit", "Turn admission's limits: turns running at once, turns "
                                   "waiting, turns of one conversation", labels=["limit"])
        for label, name in (("running", "max_running"), ("queued", "max_queued"),
                            ("per_conversation", "max_per_conversation")):
            limits.add_metric([label], read(name))
        yield limits


class RuntimeMetrics:
    """Every metric of one runtime; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        """Fresh metrics in their own registry (several runtimes in one process do not mix)."""
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter("coreai_turns", "Turns by how they ended (turn status, or the RPC status of a refusal)",
                             ["status"], registry=r)
        self.prompt_tokens = Counter("coreai_turn_prompt_tokens", "Prompt tokens of finished turns", registry=r)
        self.completion_tokens = Counter("coreai_turn_completion_tokens", "Completion tokens of finished turns",
                                         registry=r)
        self.model_queue_waiting = Gauge("coreai_model_queue_waiting", "Model calls waiting for the model's slot",
                                         registry=r)
        self.open_connections = Gauge("coreai_open_connections", "Open client connections", ["transport"],
                                      registry=r)
        self.connections_closed = Counter(
            "coreai_connections_closed", "Connections the runtime closed: refused at the cap, evicted for a newer "
            "one, timed out idle or mid-request", ["transport", "reason"], registry=r)
        self.accept_errors = Counter("coreai_accept_errors", "Failed accepts (e.g. out of file handles)", registry=r)
        self.queue_wait = Histogram("coreai_turn_queue_wait_seconds", "How long admitted turns waited for a place",
                                    buckets=QUEUE_WAIT_BUCKETS, registry=r)
        self.first_token_share = Histogram(
            "coreai_turn_first_token_added_seconds", "What the runtime added to streamed turns' first token: from the "
            "turn's arrival to its first text relayed, less the engine's own time to that text",
            buckets=FIRST_TOKEN_ADDED_BUCKETS, registry=r)
        self._admission = _AdmissionCollector()
        r.register(self._admission)
        self._model = _ModelCollector()
        r.register(self._model)
        self._prewarms = _PrewarmCollector()
        r.register(self._prewarms)
        self.model_queue_waiting.set_function(lambda: 0)

    def watch_model(self, source: ModelSnapshot) -> None:
        """Read the model host's (state, restarts) from source at every scrape."""
        self._model.source = source

    def watch_model_memory(self, source: MemorySnapshot) -> None:
        """Read the model server's (RSS, prompt cache used, limit) bytes from source at every scrape."""
        self._model.memory = source

    def watch_prewarms(self, source: PrewarmSnapshot) -> None:
        """Read the orchestrator's (sent, skipped, failed) prewarm counts from source at every scrape."""
        self._prewarms.source = source

    def watch_admission(self, source: AdmissionSnapshot) -> None:
        """Read turn admission's counts and limits from source at every scrape."""
        self._admission.source = source

    def turn_admitted(self, waited_s: float) -> None:
        """A turn got its place after waiting `waited_s` seconds."""
        self.queue_wait.observe(waited_s)

    def first_token_added(self, seconds: float | None) -> None:
        """A streamed turn ended; `seconds` of its first token were the runtime's (None: it relayed no text)."""
        if seconds is not None:
            self.first_token_share.observe(seconds)

    def watch_model_queue(self, source: Callable[[], float]) -> None:
        """Read the number of model calls waiting from source at every scrape."""
        self.model_queue_waiting.set_function(source)

    def watch_connections(self, transport: str, source: Callable[[], float]) -> None:
        """Read a transport's open connections from source at every scrape."""
        self.open_connections.labels(transport).set_function(source)

    def turn_ended(self, status: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """Count one turn (status in lower case, e.g. `ok`, `timed_out`, `resource_exhausted`)."""
        self.turns.labels(status).inc()
        if prompt_tokens > 0:
            self.prompt_tokens.inc(prompt_tokens)
        if completion_tokens > 0:
            self.completion_tokens.inc(completion_tokens)

    def render(self) -> bytes:
        """The metrics in the Prometheus text format."""
        return generate_latest(self.registry)
