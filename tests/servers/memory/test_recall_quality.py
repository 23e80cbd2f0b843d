"""Hybrid recall is at least as good as its better half: vector on paraphrases, keyword on rare terms.

Measured on the tuning questions of bench/recall_data (the held-out ones stay out of every test)
over their answers and 60 other facts of the same household, stored and recalled through the real
store, FTS5 index and local embedding model. ``python -m bench.recall_quality`` runs the same
questions over all 1,000 facts, and the held-out questions too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.recall_quality import load_facts, load_queries, score
from servers.memory.embeddings import Embedder

pytestmark = pytest.mark.anyio

DISTRACTORS = 60


async def test_hybrid_recall_beats_or_ties_the_better_single_mode_of_each_query_kind(
    tmp_path: Path, embedder: Embedder
) -> None:
    everything = load_facts()
    queries = load_queries("tuning", everything)
    chosen = sorted({query.answer for query in queries} | set(range(DISTRACTORS)))
    facts = [everything[index] for index in chosen]
    queries = load_queries("tuning", facts)
    scores = (await score(facts, {"tuning": queries}, embedder, tmp_path))["tuning"]
    paraphrase = {mode: scores["paraphrase", mode] for mode in ("keyword", "vector", "hybrid")}
    exact = {mode: scores["exact", mode] for mode in ("keyword", "vector", "hybrid")}
    assert paraphrase["hybrid"].hits >= paraphrase["vector"].hits, paraphrase
    assert exact["hybrid"].hits >= exact["keyword"].hits, exact
    # Paraphrases are what keyword search cannot find: the set would show nothing otherwise.
    assert paraphrase["vector"].hits > paraphrase["keyword"].hits, paraphrase
    assert (paraphrase["hybrid"].total, exact["hybrid"].total) == (30, 12)
