"""Audit append throughput and latency: group commit under concurrent appenders, ``synchronous=FULL``.

``python -m bench.audit_append [--quick]``. Each round starts a fresh ledger file and has
``APPENDERS`` tasks append tool-call entries one at a time, each waiting until its entry is
committed, as the orchestrator's concurrent goals do. Ours goes through the audit server's
group-commit writer (validation, hash chain, one transaction per batch). The baseline, measured in
the same run with the same schema, appenders and entries, is a plain INSERT in a transaction of
its own per entry (no validation, no hashing): what the ledger would cost without group commit.

The rows: cost per entry (round wall time / entries; 0.5 ms is 2,000 entries/s), the latency of
every append, and each round's p99 latency (target 10 ms). This measures the store and its writer
in-process; a control-plane request adds one MCP round trip on top (see the tool call row). Every
append waits for at least one fsync, so the disk's own fsync latency, printed first, bounds the
latency rows: on a busy shared disk the p99 target can be out of reach whatever the code does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from bench.mesh_run import workdir
from bench.stats import Result, percentile, table
from bench.support import describe, progress
from servers.audit.committer import GroupCommitter
from servers.audit.store import Ledger, open_database
from shared.protocol.audit.bodies import ToolCallBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft

APPENDERS = 16
TARGET_PER_ENTRY_MS = 0.5
"""2,000 entries/s."""
TARGET_P99_MS = 10.0
BASELINE = "one transaction per entry (plain INSERT, synchronous=FULL)"
INSERT = (
    "INSERT INTO ledger(at, kind, source, agent, goal_id, subject, body, turn_index, prev_hash, hash) "
    "VALUES (?, 'tool_call', 'channel:console', 'nexo', ?, ?, ?, NULL, ?, ?)"
)

Append = Callable[[int, int], Awaitable[None]]
"""(appender, i) -> returns once that entry is committed."""


def draft(appender: int, i: int) -> EntryDraft:
    body = ToolCallBody(
        tool="memory__search",
        args_sha256=args_digest({"q": f"{appender}-{i}"}),
        duration_ms=3.2,
        outcome="ok",
    )
    return EntryDraft.of(
        body, source="channel:console", agent="nexo", goal_id=f"g-{appender}", subject="search"
    )


async def _round(append: Append, per_appender: int) -> tuple[float, list[float]]:
    """Wall seconds for all appenders, and each append's latency in ms."""
    latencies: list[float] = []

    async def appender(index: int) -> None:
        for i in range(per_appender):
            start = time.perf_counter()
            await append(index, i)
            latencies.append((time.perf_counter() - start) * 1000)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(APPENDERS):
            tg.start_soon(appender, index)
    return time.perf_counter() - started, latencies


async def group_commit(path: Path, per_appender: int) -> tuple[float, list[float], int]:
    """One round through the group-commit writer; also how many commits it took."""
    async with open_database(path) as db, anyio.create_task_group() as tg:
        committer = GroupCommitter(Ledger(db))
        await tg.start(committer.run)

        async def append(appender: int, i: int) -> None:
            await committer.append([draft(appender, i)])

        elapsed, latencies = await _round(append, per_appender)
        report = await committer.ledger.verify()
        tg.cancel_scope.cancel()
    if not report.ok or report.checked != APPENDERS * per_appender:
        raise RuntimeError(f"the ledger did not verify after the round: {report.problem}")
    return elapsed, latencies, committer.batches


async def one_transaction_each(path: Path, per_appender: int) -> tuple[float, list[float]]:
    async with open_database(path) as db:

        async def append(appender: int, i: int) -> None:
            entry = draft(appender, i)
            async with db.transaction() as tx:
                await tx.execute(
                    INSERT, ("2026-11-21T12:00:00.000000+00:00", entry.goal_id, entry.subject, "{}", "0", "0")
                )

        return await _round(append, per_appender)


def fsync_ms(directory: Path, n: int = 200) -> list[float]:
    """What one fsync of an 8 KiB append costs on this disk right now: the floor under every commit."""
    path = directory / "fsync.probe"
    samples: list[float] = []
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        for _ in range(n):
            os.write(fd, b"\0" * 8192)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def _per_entry_ms(elapsed_s: float, entries: int) -> float:
    return elapsed_s / entries * 1000


async def _measure(quick: bool) -> list[Result]:
    rounds, per_appender = (3, 40) if quick else (7, 150)
    entries = APPENDERS * per_appender
    cost = Result("audit append: cost per entry", "ms", BASELINE, target=TARGET_PER_ENTRY_MS)
    latency = Result("audit append: latency", "ms", BASELINE)
    p99 = Result("audit append: p99 latency per round", "ms", BASELINE, target=TARGET_P99_MS)
    with workdir() as tmp:
        disk = fsync_ms(tmp)
        progress(
            f"audit append: this disk's fsync p50 {percentile(disk, 0.5):.2f} ms, "
            f"p99 {percentile(disk, 0.99):.2f} ms (each append waits for one or two)"
        )
        for n in range(rounds):
            progress(f"audit append: round {n + 1}/{rounds}, {APPENDERS} appenders x {per_appender} entries")
            try:
                base_s, base_ms = await one_transaction_each(tmp / f"baseline-{n}.db", per_appender)
                ours_s, ours_ms, commits = await group_commit(tmp / f"group-{n}.db", per_appender)
            except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
                cost.errors.append(describe(exc))
                break
            progress(
                f"audit append: group commit {entries / ours_s:,.0f} entries/s in {commits} commits, "
                f"baseline {entries / base_s:,.0f} entries/s"
            )
            cost.samples.append(_per_entry_ms(ours_s, entries))
            cost.baseline.append(_per_entry_ms(base_s, entries))
            latency.samples.extend(ours_ms)
            latency.baseline.extend(base_ms)
            p99.samples.append(percentile(ours_ms, 0.99))
            p99.baseline.append(percentile(base_ms, 0.99))
    return [cost, latency, p99]


def measure(quick: bool) -> list[Result]:
    return anyio.run(_measure, quick)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if set(args) - {"--quick"}:
        print("usage: python -m bench.audit_append [--quick]", file=sys.stderr)
        return 2
    results = measure("--quick" in args)
    print(table(results))
    cost = results[0].summary
    if cost is not None:
        print(f"\nthroughput (median round): {1000 / cost.median:,.0f} entries/s with group commit")
    return 1 if any(result.errors for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
