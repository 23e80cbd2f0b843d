"""Prometheus metrics of the memory server: recall latency by mode, memories by state, import rate.

One registry per server (no global state). The server has no port of its own: the figures are read
through the control method ``nexo/memory/metrics`` in the Prometheus text format, which the
orchestrator appends to its own ``/metrics`` and ``nexo memory stats`` summarises. Labels are
bounded sets (recall modes, states, outcome words), never an agent's text.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

RECALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class MemoryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.recall_seconds = Histogram(
            "nexo_memory_recall_seconds",
            "Wall time of a recall (memory_recall or nexo memory search), by the mode that answered.",
            ["mode"],
            registry=r,
            buckets=RECALL_BUCKETS,
        )
        self.memories = Gauge(
            "nexo_memory_memories", "Memories stored, by state (active, archived).", ["state"], registry=r
        )
        self.imported = Counter(
            "nexo_memory_import_records",
            "Records of nexo memory import, by outcome (imported, refreshed, rejected).",
            ["outcome"],
            registry=r,
        )
        self.import_seconds = Counter(
            "nexo_memory_import_seconds",
            "Time spent importing (checking, embedding, storing); records / seconds is the import rate.",
            registry=r,
        )
        self.import_rate = Gauge(
            "nexo_memory_import_records_per_second",
            "Records per second of the latest import batch.",
            registry=r,
        )
        for state in ("active", "archived"):
            self.memories.labels(state)

    def recall(self, mode: str, seconds: float) -> None:
        self.recall_seconds.labels(mode).observe(seconds)

    def import_batch(self, imported: int, refreshed: int, rejected: int, seconds: float) -> None:
        for outcome, count in (("imported", imported), ("refreshed", refreshed), ("rejected", rejected)):
            self.imported.labels(outcome).inc(count)
        self.import_seconds.inc(seconds)
        if seconds > 0:
            self.import_rate.set((imported + refreshed + rejected) / seconds)

    def count_memories(self, total: int, archived: int) -> None:
        self.memories.labels("active").set(total - archived)
        self.memories.labels("archived").set(archived)

    def render(self) -> str:
        return generate_latest(self.registry).decode()
