"""Prometheus metrics of the memory server: recall latency by mode, memories by state, import rate,
the vectors in the search index and in the int8 copies' file.

One registry per server (no global state). The server has no port of its own: the figures are read
through the control method ``nexo/memory/metrics`` in the Prometheus text format, which the
orchestrator appends to its own ``/metrics`` and ``nexo memory stats`` summarises. Labels are
bounded sets (recall modes, states, outcome words), never an agent's text.

The Prometheus client is imported, and the registry built, by the first figure recorded or read:
an idle server holds neither (about 1 MB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

RECALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Figures:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # see the docstring

        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.recall_seconds: Histogram = Histogram(
            "nexo_memory_recall_seconds",
            "Wall time of a recall (memory_recall or nexo memory search), by the mode that answered.",
            ["mode"],
            registry=r,
            buckets=RECALL_BUCKETS,
        )
        self.memories: Gauge = Gauge(
            "nexo_memory_memories", "Memories stored, by state (active, archived).", ["state"], registry=r
        )
        self.imported: Counter = Counter(
            "nexo_memory_import_records",
            "Records of nexo memory import, by outcome (imported, refreshed, rejected).",
            ["outcome"],
            registry=r,
        )
        self.import_seconds: Counter = Counter(
            "nexo_memory_import_seconds",
            "Time spent importing (checking, embedding, storing); records / seconds is the import rate.",
            registry=r,
        )
        self.import_rate: Gauge = Gauge(
            "nexo_memory_import_records_per_second",
            "Records per second of the latest import batch.",
            registry=r,
        )
        self.vectors: Gauge = Gauge(
            "nexo_memory_vectors",
            "Vectors in the search index (where=index; 0 until the first search loads it), and of "
            "those, with their int8 copy in a file (where=file; the others are read from SQLite).",
            ["where"],
            registry=r,
        )
        for state in ("active", "archived"):
            self.memories.labels(state)


class MemoryMetrics:
    def __init__(self) -> None:
        self._built: _Figures | None = None

    @property
    def loaded(self) -> bool:
        """Whether the Prometheus client and the registry are in this process yet."""
        return self._built is not None

    def _figures(self) -> _Figures:
        if self._built is None:
            self._built = _Figures()
        return self._built

    def recall(self, mode: str, seconds: float) -> None:
        self._figures().recall_seconds.labels(mode).observe(seconds)

    def import_batch(self, imported: int, refreshed: int, rejected: int, seconds: float) -> None:
        figures = self._figures()
        for outcome, count in (("imported", imported), ("refreshed", refreshed), ("rejected", rejected)):
            figures.imported.labels(outcome).inc(count)
        figures.import_seconds.inc(seconds)
        if seconds > 0:
            figures.import_rate.set((imported + refreshed + rejected) / seconds)

    def count_memories(self, total: int, archived: int) -> None:
        figures = self._figures()
        figures.memories.labels("active").set(total - archived)
        figures.memories.labels("archived").set(archived)

    def count_vectors(self, indexed: int, filed: int) -> None:
        figures = self._figures()
        figures.vectors.labels("index").set(indexed)
        figures.vectors.labels("file").set(filed)

    def render(self) -> str:
        from prometheus_client import generate_latest  # see the docstring

        return generate_latest(self._figures().registry).decode()
