"""How many float vectors the vector search must rerank at scale: CPU time against exactness.

On the cached store of ``bench.recall_scale`` (never built here: run that first with the same
``--rows``), each question is searched as recall's vector side searches it (``k`` = 20 neighbours,
the first ten kept) once per rerank size, the sizes taking turns question by question so that a
change in the machine's load touches each alike. Per size: the process's CPU time per search,
the share of the exact top ten it returns (exact search by brute force, cached beside the store),
and whether the question's target is in its top ten. Then the stages of one search at the
shipped size, timed alone: the Hamming scan, picking the nearest codes, rescoring them, and the
rerank (the int8 copies' bounds, then the float32 vectors of the rows that may be nearest).

``python -m bench.rerank_sweep [--rows N] [--queries Q] [--per-result P ...] [--prefilter F]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import numpy as np

from bench.hashed_vectors import DIM, HashedEmbedder, cache_dir
from bench.recall_scale import AGENT, corpus, questions, sentences, text_of, upgraded
from bench.stats import Result, table
from bench.support import progress
from servers.memory import vector_q8, vector_search
from servers.memory.recall import MIN_NEIGHBOURS
from servers.memory.state import MIGRATIONS
from servers.memory.vector_cache import ids_json
from servers.memory.vector_codes import (
    CodeBlock,
    asymmetric_scores,
    codes_from_blobs,
    hamming_distances,
    sign_codes,
    smallest,
    words_for,
)
from servers.memory.vectors import VectorIndex
from shared.db import Database

K = 10
NEIGHBOURS = max(2 * K, MIN_NEIGHBOURS)
"""What vector recall asks the index for with ``limit=10`` (hybrid recall asks for ten)."""
SIZES = (10, 15, 20, 25, 30, 40)
AGREEMENT_TARGET = 0.99


def _cpu_ms(since: float) -> float:
    return (time.process_time() - since) * 1000


async def _exact_top(db: Database, queries: np.ndarray, path: Path) -> np.ndarray:
    """The exact top ten of each query (every query against each chunk of vectors in one pass, which
    reads the float vectors once), computed once and kept beside the store."""
    if path.exists():  # noqa: ASYNC240 -- a benchmark, one file once
        cached = np.load(path)
        if cached.shape == (len(queries), K):
            return np.asarray(cached, dtype=np.int64)
    progress(f"rerank sweep: exact search for {len(queries)} questions (once, cached)")
    best_ids = np.empty((len(queries), 0), dtype=np.int64)
    best = np.empty((len(queries), 0), dtype=np.float32)
    after = -1
    while True:
        rows = await db.fetchall(
            "SELECT memory_id, embedding FROM memory_vectors WHERE agent = ? AND memory_id > ? "
            "ORDER BY memory_id LIMIT 50000",
            (AGENT, after),
        )
        if not rows:
            break
        ids = np.array([row[0] for row in rows], dtype=np.int64)
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), DIM)
        best_ids = np.concatenate([best_ids, np.broadcast_to(ids, (len(queries), ids.size))], axis=1)
        best = np.concatenate([best, queries @ matrix.T], axis=1)
        keep = np.argpartition(-best, K, axis=1)[:, :K]
        best_ids = np.take_along_axis(best_ids, keep, axis=1)
        best = np.take_along_axis(best, keep, axis=1)
        after = int(ids[-1])
    top = np.take_along_axis(best_ids, np.argsort(-best, axis=1), axis=1)
    np.save(path, top)
    return top


async def _sweep(
    index: VectorIndex, queries: np.ndarray, exact: np.ndarray, targets: Sequence[int], sizes: Sequence[int]
) -> dict[int, tuple[list[float], list[float], list[bool]]]:
    figures: dict[int, tuple[list[float], list[float], list[bool]]] = {size: ([], [], []) for size in sizes}
    for position, query in enumerate(queries):
        for size in sizes:
            vector_search.RERANK_PER_RESULT = vector_search.RERANK_PER_RESULT_SMALL = size
            started = time.process_time()
            found = [i for i, _ in await index.search(AGENT, query, NEIGHBOURS)][:K]
            cpu, agreement, hit = figures[size]
            cpu.append(_cpu_ms(started))
            agreement.append(len(set(found) & set(exact[position].tolist())) / K)
            hit.append(targets[position] in found)
    return figures


async def _stages(db: Database, queries: np.ndarray, keep: int) -> dict[str, list[float]]:
    """CPU ms of each stage of a search that reranks ``keep`` rows."""
    rows = await db.fetchall(
        "SELECT memory_id, code FROM memory_vectors WHERE agent = ? ORDER BY memory_id", (AGENT,)
    )
    block = CodeBlock(words_for(DIM))
    block.upsert(
        np.array([r[0] for r in rows], dtype=np.int64), codes_from_blobs([r[1] for r in rows], words_for(DIM))
    )
    snapshot = block.snapshot()
    first = vector_search.rescored_codes(snapshot.ids.size, keep)
    stages: dict[str, list[float]] = {name: [] for name in ("hamming", "nearest codes", "rescore", "rerank")}

    def timed(name: str, work: Callable[..., np.ndarray], *args: object) -> np.ndarray:
        started = time.process_time()
        out = work(*args)
        stages[name].append(_cpu_ms(started))
        return out

    def rescore(positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        return asymmetric_scores(snapshot.columns[:, positions], query)

    for query in queries:
        code = sign_codes(query[np.newaxis, :])[0]
        distances = timed("hamming", hamming_distances, snapshot.columns, code)
        positions = timed("nearest codes", smallest, distances, first)
        scores = timed("rescore", rescore, positions, query)
        ids = snapshot.ids[positions[np.argpartition(-scores, keep)[:keep]]]
        started = time.process_time()
        # As the index reranks: the int8 copies bound every cosine, the float32 vectors of the rows
        # that may be among the nearest are read.
        bounded, estimate, error = await vector_q8.bounds(db, AGENT, query, ids)
        found = await db.fetchall(
            "SELECT memory_id, embedding FROM memory_vectors "
            "WHERE memory_id IN (SELECT value FROM json_each(?)) AND +agent = ?",
            (ids_json(bounded[vector_q8.possible_nearest(estimate, error, NEIGHBOURS)]), AGENT),
        )
        matrix = np.frombuffer(b"".join(r[1] for r in found), dtype=np.float32).reshape(len(found), DIM)
        np.argsort(1.0 - matrix @ query)
        stages["rerank"].append(_cpu_ms(started))
    return stages


async def run(rows: int, n_questions: int, sizes: Sequence[int]) -> list[Result]:
    path = cache_dir() / f"recall-scale-{rows}-v1.db"
    if not path.exists():
        raise SystemExit(f"no cached store at {path}: run `python -m bench.recall_scale --rows {rows}` first")
    embedder = HashedEmbedder()
    pool = sentences()
    chosen = corpus(len(pool), rows)
    asked = questions([text_of(pool, row) for row in chosen], n_questions)
    queries = embedder.embed([question.text for question in asked])
    shipped = (vector_search.RERANK_PER_RESULT, vector_search.RERANK_PER_RESULT_SMALL)
    async with Database.open(path, MIGRATIONS, load_vec=True) as db:
        await upgraded(db)
        index = VectorIndex(db, DIM)
        await index.load()
        exact = await _exact_top(db, queries, path.with_name(f"{path.stem}-exact-{n_questions}.npy"))
        await _sweep(index, queries[:20], exact[:20], [q.target for q in asked[:20]], sizes)  # warm-up
        figures = await _sweep(index, queries, exact, [q.target for q in asked], sizes)
        vector_search.RERANK_PER_RESULT, vector_search.RERANK_PER_RESULT_SMALL = shipped
        shipped_rows = vector_search.rerank_rows(rows, NEIGHBOURS)
        stages = await _stages(db, queries, shipped_rows)
    size = f"{rows // 1000}k" if rows < 1_000_000 else f"{rows / 1e6:g}M"
    results: list[Result] = []
    baseline_cpu = figures[max(sizes)][0]
    for per_result in sizes:
        cpu, agreement, hit = figures[per_result]
        rerank = max(vector_search.RERANK_MIN, per_result * NEIGHBOURS)
        results += [
            Result(
                f"vector search CPU, rerank {rerank} ({per_result} per neighbour), {size}",
                "ms",
                f"rerank {max(sizes) * NEIGHBOURS}",
                cpu,
                baseline_cpu,
            ),
            Result(
                f"vector search top {K} agreeing with exact, rerank {rerank}, {size}",
                "",
                "exact search (1.0)",
                [statistics.fmean(agreement)],
                [1.0],
            ),
            Result(
                f"vector search target in top {K}, rerank {rerank}, {size}",
                "",
                "exact search (1.0)",
                [statistics.fmean(hit)],
                [1.0],
            ),
        ]
    for stage, samples in stages.items():
        results.append(
            Result(f"vector search stage CPU: {stage} (rerank {shipped_rows}), {size}", "ms", "-", samples)
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rerank_sweep", description=__doc__)
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="memories of the cached store (default 1M)"
    )
    parser.add_argument("--queries", type=int, default=200, help="questions asked (default 200)")
    parser.add_argument(
        "--prefilter",
        type=int,
        help=f"codes rescored per reranked row (default {vector_search.PREFILTER_FACTOR_SMALL} up to "
        f"{vector_search.SMALL_AGENT:,} vectors, {vector_search.PREFILTER_FACTOR} past that)",
    )
    parser.add_argument(
        "--per-result", type=int, nargs="+", default=list(SIZES), help="rerank sizes per neighbour"
    )
    args = parser.parse_args()
    if args.prefilter is not None:
        vector_search.PREFILTER_FACTOR = vector_search.PREFILTER_FACTOR_SMALL = args.prefilter
    print(table(anyio.run(run, args.rows, args.queries, sorted(args.per_result))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
