"""Detection quality and cost of the memory server's secret guard, on the seeded corpus of its tests.

``python -m bench.guard_corpus [--quick]`` prints, per rule, the generated secrets caught and the
ordinary texts wrongly flagged (the corpus is ``tests/servers/memory/test_guard_corpus.py``, so the
table shows exactly what the tests assert), then the summary rows that ``measure`` returns for
``python -m bench``: the share of secrets missed, the share of ordinary texts flagged (both with a
target of zero) and the time to scan a full MEMORY.md.

Baseline of the timing row: one rule's regex (``github-pat``) over the same text, so the ratio
reads as "a full scan costs this many single-pattern passes".
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.stats import Result, table
from servers.memory.guard import SecretGuard
from shared.secrets.rules import RULES
from tests.servers.memory.test_guard_corpus import SEED, Hit, ordinary_corpus, true_positives

SCAN_BYTES = 16_384
"""The size of the timed document: the default MEMORY.md budget."""
SCAN_TARGET_MS = 10.0
"""Every write scans its text once; a full MEMORY.md must not add noticeable latency to a tool call."""


@dataclass
class RuleScore:
    generated: int = 0
    caught: int = 0
    false_positives: int = 0


@dataclass
class Report:
    scores: dict[str, RuleScore]
    ordinary: int
    missed: list[Hit] = field(default_factory=list)
    false_positives: list[tuple[str, str]] = field(default_factory=list)
    """(rule id, ordinary text it fired on)."""


def evaluate(guard: SecretGuard, hits: list[Hit], ordinary: list[str]) -> Report:
    """A hit is caught when a finding of its own rule covers the whole secret."""
    report = Report({rule.id: RuleScore() for rule in RULES}, len(ordinary))
    for hit in hits:
        score = report.scores[hit.rule_id]
        score.generated += 1
        if any(
            f.rule_id == hit.rule_id and f.start <= hit.start and f.end >= hit.end
            for f in guard.scan(hit.text)
        ):
            score.caught += 1
        else:
            report.missed.append(hit)
    for text in ordinary:
        for rule_id in sorted({f.rule_id for f in guard.scan(text)}):
            report.scores[rule_id].false_positives += 1
            report.false_positives.append((rule_id, text))
    return report


def detection_table(report: Report) -> str:
    rows = [("rule", "caught / generated", f"false positives (of {report.ordinary} ordinary texts)")]
    rows += [
        (rule_id, f"{s.caught} / {s.generated}", str(s.false_positives))
        for rule_id, s in report.scores.items()
    ]
    caught = sum(s.caught for s in report.scores.values())
    generated = sum(s.generated for s in report.scores.values())
    rows.append(
        (f"all {len(report.scores)} rules", f"{caught} / {generated}", str(len(report.false_positives)))
    )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)


def _timed_ms(action: Callable[[str], object], text: str, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        action(text)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _document(ordinary: list[str]) -> str:
    """Ordinary text of about ``SCAN_BYTES``, the size of a full MEMORY.md."""
    parts, size = [], 0
    for text in ordinary:
        parts.append(f"- {text}")
        size += len(text) + 3
        if size >= SCAN_BYTES:
            break
    return "\n".join(parts)[:SCAN_BYTES]


def run(quick: bool) -> tuple[Report, list[Result]]:
    guard = SecretGuard()
    hits = true_positives(SEED, per_case=6 if quick else 24)
    ordinary = ordinary_corpus(SEED, scale=3 if quick else 10)
    report = evaluate(guard, hits, ordinary)
    generated = sum(s.generated for s in report.scores.values())
    target_note = "none: the target is absolute"
    missed = Result("secret guard: secrets missed", "%", target_note, target=0.0)
    missed.samples = [100.0 * len(report.missed) / generated]
    noisy = Result("secret guard: ordinary texts flagged", "%", target_note, target=0.0)
    noisy.samples = [100.0 * len({text for _, text in report.false_positives}) / len(ordinary)]
    document = _document(ordinary)
    single = next(rule.pattern for rule in RULES if rule.id == "github-pat")
    n = 30 if quick else 200
    scan = Result(
        f"secret guard: scan of {len(document) // 1024} KiB",
        "ms",
        "one rule's regex (github-pat) over the same text",
        target=SCAN_TARGET_MS,
    )
    scan.baseline = _timed_ms(lambda text: list(single.finditer(text)), document, n)
    scan.samples = _timed_ms(guard.scan, document, n)
    return report, [missed, noisy, scan]


def measure(quick: bool) -> list[Result]:
    return run(quick)[1]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if set(args) - {"--quick"}:
        print("usage: python -m bench.guard_corpus [--quick]", file=sys.stderr)
        return 2
    report, results = run("--quick" in args)
    print(detection_table(report))
    for rule_id, text in report.false_positives:
        print(f"false positive: {rule_id} on {text[:80]!r}")
    for hit in report.missed:
        print(f"missed: {hit.rule_id} ({len(hit.secret)} characters, in a text of {len(hit.text)})")
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
