"""The memory server's metrics (``nexo/memory/metrics``, Prometheus text) as `nexo memory stats` shows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Recalls:
    count: int = 0
    seconds: float = 0.0
    buckets: list[tuple[float, float]] = field(default_factory=list)
    """(upper bound in seconds, cumulative count), in increasing order."""

    def at_most(self, quantile: float) -> float | None:
        """The smallest bucket bound that holds ``quantile`` of the recalls (an upper bound)."""
        wanted = quantile * self.count
        for bound, cumulative in self.buckets:
            if cumulative >= wanted and self.count:
                return bound
        return None


@dataclass
class Figures:
    recalls: dict[str, Recalls] = field(default_factory=dict)
    memories: dict[str, int] = field(default_factory=dict)
    vectors: dict[str, int] = field(default_factory=dict)
    """``index``: vectors in the search index; ``file``: of those, with their int8 copy in a file."""
    imported: dict[str, int] = field(default_factory=dict)
    import_seconds: float = 0.0
    latest_import_rate: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "recall": {
                mode: {
                    "count": r.count,
                    "mean_ms": round(1000 * r.seconds / r.count, 3) if r.count else None,
                    "p50_ms_at_most": _ms(r.at_most(0.5)),
                    "p95_ms_at_most": _ms(r.at_most(0.95)),
                }
                for mode, r in sorted(self.recalls.items())
            },
            "memories": self.memories,
            "vectors": self.vectors,
            "import": {
                "records": self.imported,
                "seconds": round(self.import_seconds, 3),
                "records_per_second": round(self.import_rate(), 1),
                "latest_batch_records_per_second": round(self.latest_import_rate, 1),
            },
        }

    def import_rate(self) -> float:
        records = sum(self.imported.values())
        return records / self.import_seconds if self.import_seconds > 0 else 0.0

    def lines(self) -> list[str]:
        recall = [
            f"{mode} {r.count} (mean {1000 * r.seconds / r.count:.1f} ms, p95 <= {_bound(r.at_most(0.95))})"
            for mode, r in sorted(self.recalls.items())
            if r.count
        ]
        shown = [f"recalls       {', '.join(recall) or 'none since the server started'}"]
        indexed = self.vectors.get("index", 0)
        if indexed:
            shown.append(
                f"vectors       {indexed} in the search index, {self.vectors.get('file', 0)} with their "
                "int8 copy in a file"
            )
        records = sum(self.imported.values())
        if records:
            shown.append(
                f"imported      {records} records since start at {self.import_rate():.0f}/s "
                f"(latest batch {self.latest_import_rate:.0f}/s)"
            )
        return shown


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None or math.isinf(seconds) else round(seconds * 1000, 3)


def _bound(seconds: float | None) -> str:
    if seconds is None or math.isinf(seconds):
        return "more than the largest bucket"
    return f"{seconds * 1000:g} ms"


def figures(text: str) -> Figures:
    found = Figures()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "nexo_memory_recall_seconds_bucket":
                found.recalls.setdefault(sample.labels["mode"], Recalls()).buckets.append(
                    (float(sample.labels["le"]), sample.value)
                )
            elif sample.name == "nexo_memory_recall_seconds_count":
                found.recalls.setdefault(sample.labels["mode"], Recalls()).count = int(sample.value)
            elif sample.name == "nexo_memory_recall_seconds_sum":
                found.recalls.setdefault(sample.labels["mode"], Recalls()).seconds = sample.value
            elif sample.name == "nexo_memory_memories":
                found.memories[sample.labels["state"]] = int(sample.value)
            elif sample.name == "nexo_memory_vectors":
                found.vectors[sample.labels["where"]] = int(sample.value)
            elif sample.name == "nexo_memory_import_records_total":
                found.imported[sample.labels["outcome"]] = int(sample.value)
            elif sample.name == "nexo_memory_import_seconds_total":
                found.import_seconds = sample.value
            elif sample.name == "nexo_memory_import_records_per_second":
                found.latest_import_rate = sample.value
    for recalls in found.recalls.values():
        recalls.buckets.sort()
    return found
