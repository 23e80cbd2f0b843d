"""Samples, their summaries, and what one measurement reports."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["meets", "misses", "-", "error"]


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the value at ``ceil(q * n) - 1`` of the sorted samples."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class Summary:
    n: int
    median: float
    p99: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary | None:
        if not samples:
            return None
        return cls(n=len(samples), median=percentile(samples, 0.5), p99=percentile(samples, 0.99))


@dataclass
class Result:
    """One row of the report. Samples are in ``unit`` already (ms, s, MB)."""

    name: str
    unit: str
    baseline_name: str
    samples: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    target: float | None = None
    """The median must not exceed this (same unit); None when the row only tracks a ratio."""
    relative_target: tuple[float, float] | None = None
    """``(factor, offset)``: the median must not exceed ``factor`` x the baseline's median + ``offset``
    (same unit), for targets set against a figure measured in the same run."""
    errors: list[str] = field(default_factory=list)

    @property
    def summary(self) -> Summary | None:
        return Summary.of(self.samples)

    @property
    def baseline_summary(self) -> Summary | None:
        return Summary.of(self.baseline)

    @property
    def ratio(self) -> float | None:
        ours, base = self.summary, self.baseline_summary
        if ours is None or base is None or base.median <= 0:
            return None
        return ours.median / base.median

    @property
    def limit(self) -> float | None:
        """The largest median that meets the target; None without a target (or its baseline)."""
        if self.relative_target is None:
            return self.target
        base = self.baseline_summary
        if base is None:
            return None
        factor, offset = self.relative_target
        return factor * base.median + offset

    @property
    def target_text(self) -> str:
        if self.relative_target is not None:
            factor, offset = self.relative_target
            plus = f" + {offset:g} {self.unit}" if offset else ""
            return f"p50 <= {factor:g}x baseline{plus}"
        return "-" if self.target is None else f"p50 <= {self.target:g} {self.unit}"

    @property
    def verdict(self) -> Verdict:
        ours = self.summary
        if self.errors or ours is None:
            return "error"
        limit = self.limit
        if limit is None:
            return "-"
        return "meets" if ours.median <= limit else "misses"

    def as_dict(self) -> dict[str, Any]:
        def side(summary: Summary | None) -> dict[str, Any] | None:
            if summary is None:
                return None
            return {"n": summary.n, "median": summary.median, "p99": summary.p99}

        return {
            "name": self.name,
            "unit": self.unit,
            **(side(self.summary) or {"n": 0, "median": None, "p99": None}),
            "baseline": {"name": self.baseline_name, **(side(self.baseline_summary) or {"n": 0})},
            "ratio": self.ratio,
            "target": None if self.limit is None else {"statistic": "median", "max": self.limit},
            "verdict": self.verdict,
            "errors": list(self.errors),
        }


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if value >= 100:
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}"
    elif value >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}"


def table(results: Sequence[Result]) -> str:
    header = ["name", "median", "p99", "baseline median", "baseline p99", "ratio", "target", "verdict"]
    rows = [header]
    for r in results:
        ours, base, ratio = r.summary, r.baseline_summary, r.ratio
        rows.append(
            [
                f"{r.name} (n={ours.n if ours else 0})",
                _value(ours.median if ours else None, r.unit),
                _value(ours.p99 if ours else None, r.unit),
                _value(base.median if base else None, r.unit),
                _value(base.p99 if base else None, r.unit),
                "n/a" if ratio is None else f"{ratio:.2f}x",
                r.target_text,
                r.verdict,
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    notes = [f"  {r.name}: baseline is {r.baseline_name}" for r in results]
    for r in results:
        notes.extend(f"  {r.name}: ERROR {' '.join(error.split())}" for error in r.errors)
    return "\n".join(
        [*lines, "", "ratio = median / baseline median; p99 = value at ceil(0.99 n) - 1", *notes]
    )


def run_alone(name: str, measure: Callable[[bool], list[Result]], argv: list[str] | None = None) -> int:
    """``python -m bench.NAME [--quick]``: measure, print the table; exit 1 when a measurement
    could not be taken, 2 on a usage error."""
    args = sys.argv[1:] if argv is None else argv
    if set(args) - {"--quick"}:
        print(f"usage: python -m bench.{name} [--quick]", file=sys.stderr)
        return 2
    results = measure("--quick" in args)
    print(table(results))
    return 1 if any(result.errors for result in results) else 0
