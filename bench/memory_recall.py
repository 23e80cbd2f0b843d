"""`memory_recall` as a client uses it: the real memory server over stdio, the official MCP SDK
client, real text, every mode.

The store holds N real sentences of this machine (bench/text_corpus.py: manual pages,
/usr/share/doc, Python docstrings) of one agent, with creation times spread over a year, access
counts and importances drawn from a fixed seed, so it looks like a store that has lived. Their
embeddings are computed once with the local model and cached on disk (chunk by chunk; the first
100k build takes a while, later runs reuse it), then inserted directly through the server's own
store, and the database is cached too; each run works on a copy.

Each query (held out: built at bench time from the corpus, never from the tuning data) is sent
as a `memory_recall` tool call (limit 10) in each mode, hybrid, keyword and vector. Reported:
latency p50/p95/p99 per mode beside the round trip of `tools/list` on the same connection (the
transport's floor: the 2026-07-28 protocol has no ping), how often the target sentence comes
first (top-1) and within the ten (top-10) per mode and query kind, the server's PSS idle and
after the queries, and hybrid recall again after one consolidation pass.

Size: 100k by default (10k with --quick); `python -m bench --only memory_recall --size 1000000`
or NEXO_BENCH_MEMORY_SIZE=1000000 for a million (the machine may not hold that much text: the row
names say how many sentences there really were).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import Client

from bench.memory_dataset import cache_dir
from bench.memory_server import AGENT, cached_corpus, cached_embeddings, digest, memory_server, pss_mb
from bench.stats import Result, percentile
from bench.support import describe, progress
from bench.text_corpus import Query, queries
from servers.memory.embedding_local import GRAPH_REVISION, LocalEmbedder
from servers.memory.models import NewMemory
from servers.memory.settings import MemorySettings
from servers.memory.state import MIGRATIONS, open_service
from shared.protocol.memory.memory_md import ConsolidateParams, ConsolidateRequest, ConsolidateResult
from shared.protocol.memory.meta import tool_meta

DEFAULT_SIZE = 100_000
QUICK_SIZE = 10_000
SIZE_ENV = "NEXO_BENCH_MEMORY_SIZE"
MODES = ("hybrid", "keyword", "vector")
LIMIT = 10
SEED = 7
INSERT_CHUNK = 5_000
YEAR_S = 365 * 86_400.0
DB_VERSION = 1


def size_from(size: int | None, quick: bool) -> int:
    if size is not None:
        return size
    configured = os.environ.get(SIZE_ENV, "").replace("_", "")
    if configured:
        if not configured.isdigit() or int(configured) < 100:
            raise ValueError(f"{SIZE_ENV}={configured!r}: expected a whole number of memories, at least 100")
        return int(configured)
    return QUICK_SIZE if quick else DEFAULT_SIZE


def label(n: int) -> str:
    return f"{n / 1_000_000:g}M" if n >= 1_000_000 else f"{n / 1000:g}k"


def _database_cache(n: int, text_digest: str) -> Path:
    schema = hashlib.sha256("+".join(m.name for m in MIGRATIONS).encode()).hexdigest()[:8]
    return cache_dir() / f"memory-recall-text-v{DB_VERSION}-{text_digest}-{schema}-n{n}.sqlite3"


async def _build_database(path: Path, sentences: list[str], vectors: np.ndarray) -> None:
    """Direct insertion of precomputed embeddings through the server's own store (no model call)."""
    rng = random.Random(SEED)
    now = time.time()
    work = Path(tempfile.mkdtemp(prefix="nexo-bench-build-"))
    try:
        settings = MemorySettings(state_dir=work)
        async with open_service(settings, embedder=LocalEmbedder()) as service:
            for start in range(0, len(sentences), INSERT_CHUNK):
                progress(f"memory recall: inserting {start}-{min(start + INSERT_CHUNK, len(sentences))}")
                batch = []
                for index in range(start, min(start + INSERT_CHUNK, len(sentences))):
                    created = now - rng.uniform(0, YEAR_S)
                    memory = NewMemory(
                        agent=AGENT,
                        content=sentences[index],
                        tags=(),
                        kind="note",
                        provenance="owner",
                        importance=round(rng.uniform(0.1, 1.0), 2),
                        created_at=created,
                        last_accessed_at=created + rng.uniform(0, now - created),
                        access_count=min(20, int(rng.expovariate(0.7))),
                    )
                    batch.append((memory, vectors[index]))
                await service.store.add_many(batch)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(settings.database, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ids(result: Any) -> list[int]:
    content = result.structured_content or {}
    return [int(m["id"]) for m in content.get("memories", [])]


async def _recall(client: Client, query: str, mode: str) -> tuple[float, list[int]]:
    started = time.perf_counter()
    result = await client.call_tool(
        "memory_recall", {"query": query, "mode": mode, "limit": LIMIT}, meta=tool_meta(AGENT, "owner")
    )
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"memory_recall failed in mode {mode}: {result.content}")
    return elapsed, _ids(result)


def _quality(hits: dict[str, list[int | None]]) -> tuple[float, float, str]:
    """(top-1 %, top-10 %, per-kind top-10 text) from each query kind's target ranks."""
    ranks = [rank for kind in hits.values() for rank in kind]
    top1 = 100 * sum(1 for r in ranks if r == 0) / len(ranks)
    top10 = 100 * sum(1 for r in ranks if r is not None) / len(ranks)
    kinds = ", ".join(
        f"{kind} {100 * sum(1 for r in found if r is not None) / len(found):.0f}%"
        for kind, found in hits.items()
    )
    return top1, top10, kinds


async def _run_queries(
    client: Client, asked: list[Query], ids: list[int], mode: str
) -> tuple[list[float], dict[str, list[int | None]]]:
    latencies: list[float] = []
    hits: dict[str, list[int | None]] = defaultdict(list)
    for query in asked:
        elapsed, found = await _recall(client, query.text, mode)
        latencies.append(elapsed)
        target = ids[query.target]
        hits[query.kind].append(found.index(target) if target in found else None)
    return latencies, hits


async def measure_size(n: int, quick: bool) -> list[Result]:
    corpus = cached_corpus(n)
    size = f"{label(len(corpus.sentences))} real sentences"
    if len(corpus.sentences) < n:
        progress(f"memory recall: this machine has only {len(corpus.sentences)} sentences, not {n}")
    vectors = await cached_embeddings(corpus.sentences)
    cached = _database_cache(len(corpus.sentences), f"{digest(corpus.sentences)}-r{GRAPH_REVISION}")
    if not cached.exists():
        await _build_database(cached, corpus.sentences, vectors)
    asked = queries(corpus, per_kind=50 if quick else 150, seed=SEED)
    rows: list[Result] = []
    floor = Result(f"MCP tools/list round trip, stdio, {size}", "ms", "none (the transport's floor)")
    rows.append(floor)
    with tempfile.TemporaryDirectory(prefix="nexo-bench-recall-") as state:
        database = MemorySettings(state_dir=Path(state)).database
        database.parent.mkdir(parents=True)
        shutil.copyfile(cached, database)
        async with memory_server(Path(state)) as (client, pid):
            for _ in range(20):
                started = time.perf_counter()
                await client.list_tools()
                floor.samples.append((time.perf_counter() - started) * 1000)
            # Ids follow insertion order: sentence i is memory i + 1.
            ids = list(range(1, len(corpus.sentences) + 1))
            await _recall(client, "warm up the model and the index", "hybrid")
            idle = pss_mb(pid)
            for mode in MODES:
                progress(f"memory recall: {size}: {len(asked)} {mode} recalls")
                latencies, hits = await _run_queries(client, asked, ids, mode)
                top1, top10, kinds = _quality(hits)
                rows.append(
                    Result(
                        f"memory_recall {mode} via MCP stdio, {size} "
                        f"(p95 {percentile(latencies, 0.95):.1f} ms)",
                        "ms",
                        "tools/list round trip on the same connection",
                        samples=latencies,
                        baseline=list(floor.samples),
                    )
                )
                rows.append(Result(f"memory_recall {mode} target top-1, {size}", "%", "-", samples=[top1]))
                rows.append(
                    Result(f"memory_recall {mode} target top-10 ({kinds}), {size}", "%", "-", samples=[top10])
                )
            after = pss_mb(pid)
            rows.append(
                Result(
                    f"memory server PSS after {len(asked) * len(MODES)} recalls, {size}",
                    "MB",
                    "the same server idle after start and one recall",
                    samples=[after] if after is not None else [],
                    baseline=[idle] if idle is not None else [],
                )
            )
            progress(f"memory recall: {size}: one consolidation pass")
            consolidated = await client.session.send_request(
                ConsolidateRequest(params=ConsolidateParams(agent=AGENT)), ConsolidateResult
            )
            latencies, hits = await _run_queries(client, asked, ids, "hybrid")
            top1, top10, kinds = _quality(hits)
            rows.append(
                Result(
                    f"memory_recall hybrid after consolidation "
                    f"({consolidated.archived_count} archived), {size}",
                    "ms",
                    "tools/list round trip on the same connection",
                    samples=latencies,
                    baseline=list(floor.samples),
                )
            )
            rows.append(
                Result(
                    f"memory_recall hybrid target top-10 after consolidation ({kinds}), {size}",
                    "%",
                    "-",
                    samples=[top10],
                )
            )
    for row in rows:
        if not row.samples:
            row.errors.append("not measured (the server's /proc entry was not found)")
    return rows


def measure(quick: bool, size: int | None = None) -> list[Result]:
    try:
        n = size_from(size, quick)
    except ValueError as exc:
        failed = Result("memory_recall via MCP", "-", "-")
        failed.errors.append(str(exc))
        return [failed]
    source = "--size" if size else SIZE_ENV if os.environ.get(SIZE_ENV) else "the default"
    progress(f"memory recall: size {n} (from {source})")
    try:
        return anyio.run(measure_size, n, quick)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        failed = Result(f"memory_recall via MCP, {label(n)}", "-", "-")
        failed.errors.append(f"the measurement failed: {describe(exc)}")
        return [failed]
