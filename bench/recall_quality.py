"""Top-1 accuracy of the memory server's recall modes on 1,000 written facts, side by side.

The facts (bench/recall_data/facts.txt) are what a personal agent remembers about one household:
people, health, money, home, work, travel, with the names, codes and jargon real notes carry. Two
query sets ask about them, each in two kinds:

- ``paraphrase``: a question in other words than the fact's ("who looks after our teeth?" for
  "The family dentist is Dr. Okafor ...");
- ``exact``: a rare term that appears in one fact only (an error code, a serial number, a tool name).

``tuning.tsv`` is the set hybrid recall was tuned on (and the one the tests use);
``heldout.tsv`` was written at the same time and never used for tuning, so its figures say how the
tuning generalises. A query scores when the fact it names is the first memory recalled.

Every fact is stored through ``MemoryStore`` on a real SQLite file and embedded by the local model;
recall runs through ``Recaller``, as the memory server does it.

``python -m bench.recall_quality [--set tuning|heldout]``
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import anyio

from bench.stats import Result
from bench.support import progress
from servers.memory.embeddings import Embedder, EmbeddingSettings, build_embedder
from servers.memory.models import NewMemory, Vector
from servers.memory.recall import Recaller
from servers.memory.state import MIGRATIONS
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.db import Database
from shared.protocol.memory_terms import RecallMode

DATA = Path(__file__).parent / "recall_data"
QuerySet = Literal["tuning", "heldout"]
QueryKind = Literal["paraphrase", "exact"]
MODES: tuple[RecallMode, ...] = ("keyword", "vector", "hybrid")
AGENT = "bench"
SET_LABELS: dict[QuerySet, str] = {
    "tuning": "tuning set (hybrid recall was tuned on it; the tests use it)",
    "heldout": "held-out set (never used for tuning)",
}


@dataclass(frozen=True, slots=True)
class Query:
    kind: QueryKind
    text: str
    answer: int
    """Index in the facts of the one fact that answers the query."""


def load_facts() -> list[str]:
    return (DATA / "facts.txt").read_text(encoding="utf-8").splitlines()


def load_queries(name: QuerySet, facts: Sequence[str]) -> list[Query]:
    """The queries of a set; each line names its answer by a substring found in exactly one fact."""
    path = DATA / f"{name}.tsv"
    queries: list[Query] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        kind, text, needle = line.split("\t")
        if kind not in get_args(QueryKind):
            raise ValueError(f"{path}:{number}: kind {kind!r} is not one of {get_args(QueryKind)}")
        answers = [index for index, fact in enumerate(facts) if needle in fact]
        if len(answers) != 1:
            raise ValueError(f"{path}:{number}: {needle!r} is in {len(answers)} facts, expected exactly 1")
        queries.append(Query(kind, text, answers[0]))  # type: ignore[arg-type]  # checked just above
    return queries


@dataclass(frozen=True, slots=True)
class Score:
    hits: int
    total: int

    def __str__(self) -> str:
        return f"{self.hits}/{self.total}"


Scores = dict[tuple[QueryKind, RecallMode], Score]


async def score(
    facts: Sequence[str], query_sets: Mapping[QuerySet, Sequence[Query]], embedder: Embedder, directory: Path
) -> dict[QuerySet, Scores]:
    """Top-1 hits per set, query kind and recall mode, over the facts stored in ``directory``."""
    vectors = await embedder.embed(list(facts))
    async with Database.open(directory / "memory.db", MIGRATIONS, load_vec=True) as db:
        index = VectorIndex(db, embedder.dim)
        await index.load()
        store = MemoryStore(db, index)
        stored = await store.add_many(
            [
                (NewMemory(AGENT, fact, (), "fact", "owner", 0.5), vector)
                for fact, vector in zip(facts, vectors, strict=True)
            ]
        )
        ids = [item.memory.id for item in stored]

        # Each question embedded once, in one batch: vector and hybrid recall ask for the same text.
        texts = sorted({query.text for queries in query_sets.values() for query in queries})
        embedded: dict[str, Vector] = dict(zip(texts, await embedder.embed(texts), strict=True))

        async def embed_one(text: str) -> Vector:
            return embedded[text]

        recaller = Recaller(store, embed_one)
        results: dict[QuerySet, Scores] = {}
        for name, queries in query_sets.items():
            scores: Scores = {}
            for kind in get_args(QueryKind):
                chosen = [query for query in queries if query.kind == kind]
                for mode in MODES:
                    hits = 0
                    for query in chosen:
                        recalled = await recaller.recall(AGENT, query.text, mode=mode, limit=1, touch=False)
                        hits += [memory.id for memory in recalled.memories] == [ids[query.answer]]
                    scores[kind, mode] = Score(hits, len(chosen))
            results[name] = scores
    return results


async def _measure_all() -> dict[QuerySet, Scores]:
    facts = load_facts()
    query_sets = {name: load_queries(name, facts) for name in get_args(QuerySet)}
    embedder = build_embedder(EmbeddingSettings())
    progress(
        f"recall quality: {len(facts)} facts, {sum(map(len, query_sets.values()))} queries in three modes"
    )
    try:
        with tempfile.TemporaryDirectory(prefix="nexo-bench-") as directory:
            return await score(facts, query_sets, embedder, Path(directory))
    finally:
        await embedder.aclose()


def report(results: Mapping[QuerySet, Scores], facts: int) -> str:
    """The scores side by side, one block per query set, each block saying which set it is."""
    lines = [
        f"data: bench/recall_data/facts.txt ({facts} facts); a query scores when its fact is recalled first"
    ]
    for name, scores in results.items():
        lines += [
            "",
            f"{name}.tsv: {SET_LABELS[name]}",
            f"{'query kind':<12} {'keyword':>8} {'vector':>8} {'hybrid':>8}",
        ]
        for kind in get_args(QueryKind):
            lines.append(f"{kind:<12} " + " ".join(f"{scores[kind, mode]!s:>8}" for mode in MODES))
    return "\n".join(lines)


def measure(quick: bool) -> list[Result]:
    """Rows for ``python -m bench``: hybrid top-1 against the better single mode of each query kind."""
    del quick  # one run is already deterministic
    results = anyio.run(_measure_all)
    progress("recall quality, top-1 of every mode:\n" + report(results, len(load_facts())))
    rows: list[Result] = []
    for name, scores in results.items():
        for kind, rival in (("paraphrase", "vector"), ("exact", "keyword")):
            hybrid, other = scores[kind, "hybrid"], scores[kind, rival]  # type: ignore[index]
            rows.append(
                Result(
                    f"memory recall top-1, {kind} queries, {name} set (hybrid, hits of {hybrid.total})",
                    "hits",
                    f"{rival} recall",
                    samples=[float(hybrid.hits)],
                    baseline=[float(other.hits)],
                )
            )
    return rows


def main() -> int:
    argparse.ArgumentParser(
        prog="python -m bench.recall_quality", description=__doc__.split("\n")[0]
    ).parse_args()
    logging.basicConfig(level=logging.WARNING, format="bench: log %(name)s: %(message)s", stream=sys.stderr)
    print(report(anyio.run(_measure_all), len(load_facts())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
