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
from functools import partial

import anyio

from bench import (
    audit_append,
    cold_start,
    cron,
    dashboard_feed,
    db_statement,
    email_send,
    embedding_model,
    guard_corpus,
    idle_day,
    mcp_server_start,
    memory,
    memory_import,
    memory_index,
    memory_recall,
    one_shot,
    platform_turn,
    recall_quality,
    recall_scale,
    server_restart,
    tool_call,
    turn_cpu,
    turn_overhead,
)
from bench.stats import Result, table
from bench.support import describe, progress

Measure = Callable[[bool], list[Result]]


def _tool_call(quick: bool) -> list[Result]:
    return anyio.run(tool_call.measure, quick)


MEASUREMENTS: dict[str, tuple[Measure, str]] = {
    "tool_call": (_tool_call, "tool call"),
    "turn_overhead": (turn_overhead.measure, "turn overhead"),
    "turn_cpu": (turn_cpu.measure, "CPU per warm turn, by process"),
    "cold_start": (cold_start.measure, "cold start"),
    "one_shot": (one_shot.measure, "one-shot commands"),
    "mcp_server_start": (mcp_server_start.measure, "nexo mcp-server start"),
    "memory": (memory.measure, "mesh memory (RSS, PSS, USS)"),
    "server_restart": (server_restart.measure, "built-in server restart"),
    "guard_corpus": (guard_corpus.measure, "secret guard corpus"),
    "audit_append": (audit_append.measure, "audit append"),
    "db_statement": (db_statement.measure, "SQLite statement CPU"),
    "memory_recall": (memory_recall.measure, "memory recall"),
    "memory_index": (memory_index.measure, "memory vector index (synthetic)"),
    "memory_import": (memory_import.measure, "memory import"),
    "embedding_model": (embedding_model.measure, "local embedding model: memory held and CPU per run"),
    "recall_quality": (recall_quality.measure, "memory recall quality"),
    "recall_scale": (recall_scale.measure, "memory recall at scale on real text"),
    "cron": (cron.measure, "cron fires"),
    "idle_day": (idle_day.measure, "idle day of autonomy"),
    "platform_turn": (platform_turn.measure, "turn overhead through chat platforms"),
    "dashboard_feed": (dashboard_feed.measure, "dashboard feed latency (10 pages)"),
    "email_send": (email_send.measure, "email replies over SMTP"),
}


SIZED: dict[str, Callable[..., list[Result]]] = {
    "memory_recall": memory_recall.measure,
    "memory_import": memory_import.measure,
}
"""Measurements that take ``--size``."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (about a minute in all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument(
        "--only", action="append", choices=sorted(MEASUREMENTS), help="run only this measurement (repeatable)"
    )
    parser.add_argument(
        "--size",
        type=int,
        help=f"memories for memory_recall and memory_import (default {memory_recall.DEFAULT_SIZE} and "
        f"{memory_import.DEFAULT_RECORDS}; also ${memory_recall.SIZE_ENV})",
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
        if name in SIZED and args.size is not None:
            measure = partial(SIZED[name], size=args.size)
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
