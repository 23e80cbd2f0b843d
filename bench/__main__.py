"""``python -m bench [--quick] [--json] [--only NAME ...]``: measure, then print one table.

Progress goes to stderr, the table (or the JSON) to stdout. The exit status is 1 when a
measurement could not be taken, 0 otherwise (a missed target is a finding, not a crash).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable

import anyio

from bench import (
    audit_append,
    cold_start,
    cron,
    guard_corpus,
    memory,
    memory_recall,
    recall_quality,
    recall_scale,
    tool_call,
    turn_overhead,
)
from bench.stats import Result, table
from bench.support import describe, progress

Measure = Callable[[bool], list[Result]]


def _tool_call(quick: bool) -> list[Result]:
    return anyio.run(tool_call.measure, quick)


def _turn_overhead(quick: bool) -> list[Result]:
    return anyio.run(turn_overhead.measure, quick)


MEASUREMENTS: dict[str, tuple[Measure, str]] = {
    "tool_call": (_tool_call, "tool call"),
    "turn_overhead": (_turn_overhead, "turn overhead"),
    "cold_start": (cold_start.measure, "cold start"),
    "memory": (memory.measure, "mesh memory (RSS)"),
    "guard_corpus": (guard_corpus.measure, "secret guard corpus"),
    "audit_append": (audit_append.measure, "audit append"),
    "memory_recall": (memory_recall.measure, "memory recall"),
    "recall_quality": (recall_quality.measure, "memory recall quality"),
    "recall_scale": (recall_scale.measure, "memory recall at scale on real text"),
    "cron": (cron.measure, "cron fires"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (about a minute in all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument(
        "--only", action="append", choices=sorted(MEASUREMENTS), help="run only this measurement (repeatable)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="bench: log %(name)s: %(message)s", stream=sys.stderr)
    chosen = [name for name in MEASUREMENTS if not args.only or name in args.only]
    results: list[Result] = []
    started = time.perf_counter()
    for name in chosen:
        measure, label = MEASUREMENTS[name]
        begun = time.perf_counter()
        try:
            results.extend(measure(args.quick))
        except Exception as exc:  # noqa: BLE001 -- one broken measurement must not hide the others
            failed = Result(label, "-", "-")
            failed.errors.append(f"the measurement crashed: {describe(exc)}")
            results.append(failed)
        progress(f"{name} took {time.perf_counter() - begun:.1f}s")
    elapsed = time.perf_counter() - started
    progress(f"done in {elapsed:.1f}s")
    if args.json:
        report = {
            "quick": args.quick,
            "elapsed_s": elapsed,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "results": [r.as_dict() for r in results],
        }
        print(json.dumps(report, indent=2))
    else:
        print(table(results))
    return 1 if any(r.errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
