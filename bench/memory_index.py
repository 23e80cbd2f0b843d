"""The vector index alone on synthetic vectors at 10k, 100k and 1M memories: latency and recall@10.

This measures `VectorIndex`, not the tool: bench/memory_recall.py times `memory_recall` through an
MCP client on real text. These rows say how the index itself scales where real text is too slow to
embed (a million sentences would take hours).

Each query is timed through `VectorIndex.search` (sign-bit prefilter in memory, exact rerank from
SQLite) on a database as the memory server opens it (sqlite-vec loaded, synchronous=FULL).
Baseline: `search(exact=True)` on the same queries, i.e. brute force over every float32 vector of
the agent inside SQLite (sqlite-vec's vec_distance_cosine). Recall@10 is the share of the exact top
10 that the fast search returns, averaged over the queries.

The corpus is synthetic (see bench/memory_dataset.py for how it resembles MiniLM embeddings) and
cached under ~/.cache/nexo-bench/; the first run at 1M spends about a minute building it.

``python -m bench.memory_index [--quick] [--sizes 10000,100000,1000000]``
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass

import anyio
import numpy as np

from bench.memory_dataset import AGENT, DIM, cached_database, queries_near
from bench.stats import Result, table
from bench.support import describe, progress
from servers.memory.vectors import VECTOR_MIGRATIONS, VectorIndex
from shared.db import Database

K = 10
FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
TARGET_MS = {100_000: 20.0, 1_000_000: 100.0}
"""p50 targets of the fast search; 10k has none (it is far below both)."""
WARMUP = 5


@dataclass(frozen=True, slots=True)
class Plan:
    queries: int
    exact_queries: int
    """Queries also timed with exact search (the baseline, and the truth for recall)."""


def plan(n: int, quick: bool) -> Plan:
    if n >= 1_000_000:
        return Plan(queries=100 if quick else 300, exact_queries=20 if quick else 50)
    if n >= 100_000:
        return Plan(queries=100 if quick else 300, exact_queries=50 if quick else 150)
    return Plan(queries=100 if quick else 300, exact_queries=100 if quick else 300)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


async def _timed_search(index: VectorIndex, query: np.ndarray, exact: bool) -> tuple[float, list[int]]:
    started = time.perf_counter()
    hits = await index.search(AGENT, query, K, exact=exact)
    return (time.perf_counter() - started) * 1000, [memory_id for memory_id, _ in hits]


async def measure_size(n: int, quick: bool) -> list[Result]:
    size = label(n)
    search = Result(
        f"vector index search (not the tool), {size} synthetic vectors (k={K})",
        "ms",
        "exact search (brute force over the agent's float32 vectors in SQLite)",
        target=TARGET_MS.get(n),
    )
    recall = Result(
        f"vector index recall@{K} vs exact, {size} synthetic vectors (mean)", "", "exact search (1.0)"
    )
    load = Result(
        f"vector index load, {size} synthetic vectors",
        "ms",
        "none (a one-off cost at the first search after a start)",
    )
    rows = [search, recall, load]
    try:
        path = await cached_database(n)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        for row in rows:
            row.errors.append(f"building the corpus failed: {describe(exc)}")
        return rows
    steps = plan(n, quick)
    async with Database.open(path, VECTOR_MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, DIM)
        started = time.perf_counter()
        await index.load()
        load.samples = [(time.perf_counter() - started) * 1000]
        rng = np.random.default_rng(n)
        sources = rng.choice(np.arange(1, n + 1), steps.queries, replace=False)
        stored = await db.fetchall(
            "SELECT embedding FROM memory_vectors WHERE memory_id IN (SELECT value FROM json_each(?)) "
            "ORDER BY memory_id",
            (str(sorted(int(i) for i in sources)),),
        )
        vectors = np.stack([np.frombuffer(blob, dtype=np.float32) for (blob,) in stored])
        queries = queries_near(vectors, seed=n)
        progress(f"memory index: {size}: {steps.queries} searches (after {WARMUP} warm-up)")
        for query in queries[:WARMUP]:
            await _timed_search(index, query, exact=False)
        found: list[list[int]] = []
        for query in queries:
            elapsed, ids = await _timed_search(index, query, exact=False)
            search.samples.append(elapsed)
            found.append(ids)
        progress(f"memory index: {size}: {steps.exact_queries} exact searches (baseline and truth)")
        shares = []
        for query, ids in zip(queries[: steps.exact_queries], found, strict=False):
            elapsed, truth = await _timed_search(index, query, exact=True)
            search.baseline.append(elapsed)
            shares.append(len(set(ids) & set(truth)) / len(truth))
        recall.samples = [float(np.mean(shares))]
        recall.baseline = [1.0]
    return rows


def sizes_for(quick: bool) -> tuple[int, ...]:
    return QUICK_SIZES if quick else FULL_SIZES


def measure(quick: bool, sizes: tuple[int, ...] | None = None) -> list[Result]:
    """Latency and recall rows for each corpus size (10k and 100k when quick, and 1M otherwise)."""
    results: list[Result] = []
    for n in sizes or sizes_for(quick):
        results.extend(anyio.run(measure_size, n, quick))
    return results


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes such as 10000,100000, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes such as 10000,100000, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_index", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k and 100k only, fewer queries")
    parser.add_argument(
        "--sizes", type=_sizes, help="comma-separated corpus sizes, e.g. 10000,100000,1000000"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="bench: log %(name)s: %(message)s", stream=sys.stderr)
    results = measure(args.quick, args.sizes)
    print(
        "data: synthetic unit vectors shaped like all-MiniLM-L6-v2 embeddings (384 dims, one agent); "
        "see bench/memory_dataset.py"
    )
    print(table(results))
    return 1 if any(r.errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
