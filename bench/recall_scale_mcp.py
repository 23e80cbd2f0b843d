"""bench.recall_scale's questions as ``memory_recall`` tool calls: the real memory server over stdio.

The store is a copy of the cached one (the server writes to it: recalled memories' access times,
consolidation), next to it on the same filesystem, removed at the end. The server is
``python -m bench.recall_scale_server``: ``servers.memory`` with the benchmark's hashed-word
embedder (the store's vectors were made so). The client is the official MCP SDK's, on stdio, one
call at a time, ``limit=10``, each mode in turn after a few warm-up calls.

Per mode: wall time of the call from the client (p50, p95, p99) beside the same questions asked in
process (the transport's and the tool layer's share is the difference), how often the target comes
first and within the ten, and the server's CPU time per question (user + system of the whole
process, from /proc, averaged over the mode's questions). Then the server's PSS after the
questions, one consolidation pass sent as the control-plane request the orchestrator sends, every
mode again, and the PSS after that. Those PSS figures hold the hashed words' table the benchmark's
embedder maps (60 to 80 MB of it touched by the questions) where the shipped server holds its model.

Then the server as it ships, ``python -m servers.memory`` with its own local embedding model, on a
copy of the store of the same rows with the model's vectors (``bench.recall_scale``), the model
loaded at start as it stays while a client asks: it embeds every question as it would for a
client. Its rows, which carry the targets: wall time per mode beside the hashed-word server's, how
often the target comes first and within the ten, the server's CPU per question and its PSS after
the questions. These are the figures a client of the shipped server sees. The benchmark's
questions are long (a memory's words less a third: 38 tokens at the median), so the shipped server
is then asked as many short ones too, four of a target's informative words, as short as the search
query a model writes, each mode's wall time beside that of the long questions. Last, one
consolidation pass (it archives all but the working set: every memory stays recallable), the long
questions again in every mode, each mode's wall time and quality beside its own before the pass,
and the PSS after that: the targets hold for an agent that has lived a while.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import Client

from bench.memory_server import memory_server, pss_mb
from bench.stats import Result, percentile
from bench.support import collector_frozen, cpu_seconds, describe, progress
from orchestrator.cli.memory_figures import figures
from servers.memory.settings import MemorySettings
from shared.protocol.memory.admin import MetricsParams, MetricsRequest, MetricsResult
from shared.protocol.memory.memory_md import ConsolidateParams, ConsolidateRequest, ConsolidateResult
from shared.protocol.memory.meta import tool_meta
from shared.protocol.memory_terms import RecallMode

SERVER_MODULE = "bench.recall_scale_server"
SHIPPED_MODULE = "servers.memory"
WARM_UP = 10
TARGET_P50_MS = 25.0
TARGET_PSS_MB = 300.0
FILE_WAIT_S = 300.0
"""The int8 copies' file of a million vectors is written in 7 to 11 s here."""


@dataclass(frozen=True, slots=True)
class Asked:
    text: str
    target: int


@dataclass
class ModeFigures:
    wall_ms: list[float] = field(default_factory=list)
    found: list[bool] = field(default_factory=list)
    first: list[bool] = field(default_factory=list)
    cpu_ms_per_question: float | None = None


async def _recall(client: Client, agent: str, text: str, mode: RecallMode, limit: int) -> list[int]:
    result = await client.call_tool(
        "memory_recall", {"query": text, "mode": mode, "limit": limit}, meta=tool_meta(agent, "owner")
    )
    if result.is_error:
        raise RuntimeError(f"memory_recall failed in mode {mode}: {result.content}")
    content: dict[str, Any] = result.structured_content or {}
    return [int(memory["id"]) for memory in content.get("memories", [])]


async def _filed(client: Client) -> None:
    """Wait until the server reads every int8 copy from its file, as a server that has lived a
    while does (``servers.memory.vector_file``: written after the first recall loads the codes)."""
    started = time.perf_counter()
    with anyio.fail_after(FILE_WAIT_S):
        while True:
            text = (
                await client.session.send_request(MetricsRequest(params=MetricsParams()), MetricsResult)
            ).text
            vectors = figures(text).vectors
            if vectors.get("index", 0) and vectors.get("file") == vectors["index"]:
                break
            await anyio.sleep(0.5)
    progress(f"recall scale over MCP: int8 copies in their file {time.perf_counter() - started:.1f} s later")


async def _ask(
    client: Client, pid: int | None, agent: str, asked: Sequence[Asked], mode: RecallMode, limit: int
) -> ModeFigures:
    for question in asked[:WARM_UP]:
        await _recall(client, agent, question.text, mode, limit)
    figures = ModeFigures()
    cpu_before = None if pid is None else cpu_seconds(pid)
    with collector_frozen():  # the client's corpus: its collections are not the server's time
        for question in asked:
            started = time.perf_counter()
            ids = await _recall(client, agent, question.text, mode, limit)
            figures.wall_ms.append((time.perf_counter() - started) * 1000)
            figures.found.append(question.target in ids)
            figures.first.append(ids[:1] == [question.target])
    cpu_after = None if pid is None else cpu_seconds(pid)
    if cpu_before is not None and cpu_after is not None:
        figures.cpu_ms_per_question = (cpu_after - cpu_before) * 1000 / len(asked)
    return figures


def _share(values: Sequence[bool]) -> list[float]:
    return [sum(values) / len(values)] if values else []


def _latency(
    name: str, measured: ModeFigures, baseline_name: str, baseline: list[float], target: float | None = None
) -> Result:
    """A mode's wall time per call, its p95 in the row's name."""
    p95 = percentile(measured.wall_ms, 0.95)
    return Result(f"{name} (p95 {p95:.1f} ms)", "ms", baseline_name, measured.wall_ms, baseline, target)


def _quality(name: str, measured: ModeFigures, label: str, limit: int) -> Result:
    return Result(
        f"{name}, target first / in top {limit}, {label}",
        "",
        f"target in top {limit}",
        _share(measured.first),
        _share(measured.found),
    )


def _rows(
    figures: dict[RecallMode, ModeFigures],
    in_process: dict[RecallMode, list[float]],
    label: str,
    limit: int,
    when: str,
) -> list[Result]:
    rows: list[Result] = []
    for mode, measured in figures.items():
        rows.append(
            _latency(
                f"memory_recall {mode} over MCP stdio{when}, {label}",
                measured,
                "the same questions in process",
                in_process.get(mode, []),
            )
        )
        rows.append(_quality(f"memory_recall {mode} over MCP{when}", measured, label, limit))
        cpu = measured.cpu_ms_per_question
        rows.append(
            Result(
                f"memory_recall {mode} over MCP{when}, server CPU per question, {label}",
                "ms",
                "-",
                [] if cpu is None else [cpu],
            )
        )
        if cpu is None:
            rows[-1].errors.append("not measured (the server's /proc entry was not found)")
    return rows


def _copy(database: Path, copy: Path) -> None:
    copy.parent.mkdir(parents=True, exist_ok=True)
    progress(f"recall scale over MCP: copying the {database.stat().st_size / 1e9:.1f} GB store")
    shutil.copyfile(database, copy)
    # Written to the disk before the server opens it: left dirty, the copy's gigabytes were flushed
    # by the server's first checkpoint, whose fsync then held one recall for seconds.
    started = time.perf_counter()
    with copy.open("rb+") as written:
        os.fsync(written.fileno())
    progress(f"recall scale over MCP: the copy written to the disk in {time.perf_counter() - started:.1f} s")


async def over_mcp(
    databases: tuple[Path, Path],
    agent: str,
    asked: Sequence[Asked],
    modes: Sequence[RecallMode],
    in_process: dict[RecallMode, list[float]],
    label: str,
    limit: int,
    short: Sequence[Asked] = (),
) -> list[Result]:
    """The rows of the module docstring, for the stores at ``databases`` (the hashed words', the
    model's); ``short``: the shorter questions the shipped server is asked too."""
    rows: list[Result] = []
    database, modelled = databases
    with tempfile.TemporaryDirectory(prefix="nexo-bench-recall-mcp-", dir=database.parent) as state:
        copy = MemorySettings(state_dir=Path(state)).database
        await anyio.to_thread.run_sync(_copy, database, copy)
        async with memory_server(Path(state), module=SERVER_MODULE) as (client, pid):
            started = time.perf_counter()
            await _recall(client, agent, asked[0].text, "vector", limit)
            progress(
                f"recall scale over MCP: first recall (loads the codes) {time.perf_counter() - started:.1f} s"
            )
            await _filed(client)
            idle = pss_mb(pid)
            figures = {mode: await _ask(client, pid, agent, asked, mode, limit) for mode in modes}
            rows += _rows(figures, in_process, label, limit, "")
            after_questions = pss_mb(pid)
            await _consolidate(client, agent, "")
            figures = {mode: await _ask(client, pid, agent, asked, mode, limit) for mode in modes}
            rows += _rows(figures, in_process, label, limit, " after consolidation")
            after_consolidation = pss_mb(pid)
        for name, pss in (
            ("the questions", after_questions),
            ("consolidation and the questions again", after_consolidation),
        ):
            rows.append(_pss_row(f"hashed-word server PSS after {name}, {label}", pss, idle, None))
    with tempfile.TemporaryDirectory(prefix="nexo-bench-recall-mcp-", dir=modelled.parent) as state:
        await anyio.to_thread.run_sync(_copy, modelled, MemorySettings(state_dir=Path(state)).database)
        rows += await _shipped(Path(state), agent, (asked, short), modes, figures, label, limit)
    return rows


async def _consolidate(client: Client, agent: str, whose: str) -> None:
    """One consolidation pass, sent as the control-plane request the orchestrator sends."""
    started = time.perf_counter()
    report = await client.session.send_request(
        ConsolidateRequest(params=ConsolidateParams(agent=agent)), ConsolidateResult
    )
    progress(
        f"recall scale over MCP: {whose}consolidation archived {report.archived_count:,} "
        f"in {time.perf_counter() - started:.1f} s"
    )


def _pss_row(name: str, pss: float | None, idle: float | None, target: float | None) -> Result:
    row = Result(
        name,
        "MB",
        "the same server after its first recall",
        [] if pss is None else [pss],
        [] if idle is None else [idle],
        target,
    )
    if pss is None:
        row.errors.append("not measured (the server's /proc entry was not found)")
    return row


async def _shipped(
    state: Path,
    agent: str,
    sets: tuple[Sequence[Asked], Sequence[Asked]],
    modes: Sequence[RecallMode],
    hashed: dict[RecallMode, ModeFigures],
    label: str,
    limit: int,
) -> list[Result]:
    """The module docstring's last rows: the shipped server, its own model embedding each question;
    ``sets``: the benchmark's questions, then shorter ones (asked after them, when there are any)."""
    asked, short = sets
    names = {
        mode: f"memory_recall {mode} over MCP, the shipped server and its model, {label}" for mode in modes
    }
    try:
        async with memory_server(state, module=SHIPPED_MODULE) as (client, pid):
            await _recall(client, agent, asked[0].text, "vector", limit)
            await _filed(client)
            idle = pss_mb(pid)
            figures = {mode: await _ask(client, pid, agent, asked, mode, limit) for mode in modes}
            after = pss_mb(pid)
            shorter = {mode: await _ask(client, pid, agent, short, mode, limit) for mode in modes if short}
            await _consolidate(client, agent, "the shipped server's ")
            consolidated = {mode: await _ask(client, pid, agent, asked, mode, limit) for mode in modes}
            after_pass = pss_mb(pid)
    except Exception as exc:  # noqa: BLE001 -- any failure to start or answer is this row set's error
        failed = [Result(name, "ms", "-", []) for name in names.values()]
        for row in failed:
            row.errors.append(f"cannot run: {describe(exc)}")
        return failed
    rows: list[Result] = []
    for mode, measured in figures.items():
        rows.append(
            _latency(
                names[mode],
                measured,
                "the hashed-word server, same questions",
                hashed[mode].wall_ms,
                TARGET_P50_MS if mode == "hybrid" else None,
            )
        )
        rows.append(
            _quality(
                f"memory_recall {mode} over MCP, the shipped server and its model", measured, label, limit
            )
        )
        cpu, hashed_cpu = measured.cpu_ms_per_question, hashed[mode].cpu_ms_per_question
        rows.append(
            Result(
                f"memory_recall {mode} over MCP, the shipped server's CPU per question, {label}",
                "ms",
                "the hashed-word server's",
                [] if cpu is None else [cpu],
                [] if hashed_cpu is None else [hashed_cpu],
            )
        )
    rows.append(
        _pss_row(f"shipped memory server PSS after the questions, {label}", after, idle, TARGET_PSS_MB)
    )
    words = f"{len(short[0].text.split())}-word questions" if short else ""
    for mode, measured in shorter.items():
        rows.append(
            _latency(
                f"memory_recall {mode} over MCP, the shipped server and its model, {words}, {label}",
                measured,
                "the same server, the benchmark's questions",
                figures[mode].wall_ms,
                TARGET_P50_MS if mode == "hybrid" else None,
            )
        )
        rows.append(
            _quality(
                f"memory_recall {mode} over MCP, the shipped server and its model, {words}",
                measured,
                label,
                limit,
            )
        )
    for mode, measured in consolidated.items():
        after_pass_name = (
            f"memory_recall {mode} over MCP, the shipped server and its model, after consolidation"
        )
        rows.append(
            _latency(
                f"{after_pass_name}, {label}",
                measured,
                "the same server before the pass",
                figures[mode].wall_ms,
                TARGET_P50_MS if mode == "hybrid" else None,
            )
        )
        rows.append(_quality(after_pass_name, measured, label, limit))
    rows.append(
        _pss_row(
            f"shipped memory server PSS after consolidation and the questions again, {label}",
            after_pass,
            idle,
            TARGET_PSS_MB,
        )
    )
    return rows
