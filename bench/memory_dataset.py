"""A synthetic corpus shaped like MiniLM sentence embeddings, built once into a cached memory database.

Embedding a million real sentences with the local model would take hours, so the recall benchmark
uses unit vectors drawn from a hierarchy that mimics how sentence embeddings spread: a direction all
of them share (MiniLM vectors are anisotropic), 48 topics, 4,000 clusters of Zipf-distributed sizes
within the topics, and per point a variation along a low-rank subspace of its topic plus isotropic
noise, with a per-dimension scale. The parameters were fitted to 20,000 real all-MiniLM-L6-v2
(int8 ONNX) embeddings of English sentences from Python docstrings and package READMEs:

    statistic over 4,000 vectors              real MiniLM            this corpus
    pairwise cosine, mean / sd / p99          0.099 / 0.108 / 0.39   0.103 / 0.087 / 0.45
    nearest neighbour cosine, median          0.610                  0.604
    10th neighbour cosine, median             0.460                  0.492
    length of the mean vector                 0.314                  0.322
    per dimension, |share positive - 0.5|     0.105                  0.099
    recall@10 of a Hamming prefilter over 20,000 vectors, 20 / 80 / 320 candidates reranked:
        real MiniLM 0.76 / 0.94 / 0.99, this corpus 0.67 / 0.92 / 0.99

so for sign-bit quantisation this corpus is a little harder than real text, not easier.

The database (the memory server's own vector table, written through `VectorIndex.add_many`) is cached
under ~/.cache/nexo-bench/ (or $XDG_CACHE_HOME/nexo-bench/), keyed by size, seed, generator version
and schema, so reruns skip the build: about 40 s and 2.2 GB for a million vectors.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.support import progress
from servers.memory.vectors import VECTOR_MIGRATIONS, VectorIndex
from shared.db import Database

DIM = 384
AGENT = "bench"
GENERATOR_VERSION = 1
_CHUNK = 50_000
_TOPICS = 48
_CLUSTERS = 4_000
_RANK = 32
# Weights of the shared direction, the topic, the cluster, the topic subspace and the noise.
_SHARED, _TOPIC, _CLUSTER, _SUBSPACE, _NOISE = 0.32, 0.55, 0.45, 0.8, 0.25
QUERY_SPREAD = 0.6
"""Gaussian noise added to a stored vector to make a query (cosine ~0.86 to its source)."""


@dataclass(frozen=True, slots=True)
class _Shape:
    shared: np.ndarray
    scale: np.ndarray
    topic_of: np.ndarray
    centres: np.ndarray
    subspaces: np.ndarray
    cluster_p: np.ndarray


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def _shape(rng: np.random.Generator, dim: int) -> _Shape:
    shared = _unit_rows(rng, 1, dim)[0]
    scale = rng.lognormal(0.0, 0.35, dim).astype(np.float32)
    topic_p = 1.0 / np.arange(1, _TOPICS + 1) ** 0.7
    topic_of = rng.choice(_TOPICS, _CLUSTERS, p=topic_p / topic_p.sum())
    topics = _unit_rows(rng, _TOPICS, dim)
    centres = _SHARED * shared + _TOPIC * topics[topic_of] + _CLUSTER * _unit_rows(rng, _CLUSTERS, dim)
    subspaces = (rng.standard_normal((_TOPICS, _RANK, dim)) / np.sqrt(dim)).astype(np.float32)
    cluster_p = 1.0 / np.arange(1, _CLUSTERS + 1) ** 0.9
    return _Shape(shared, scale, topic_of, centres, subspaces, cluster_p / cluster_p.sum())


def synthetic_chunks(n: int, seed: int = 0, dim: int = DIM) -> Iterator[np.ndarray]:
    """`n` float32 unit vectors, `_CHUNK` rows at a time (the same rows for the same seed)."""
    rng = np.random.default_rng(seed)
    shape = _shape(rng, dim)
    for first in range(0, n, _CHUNK):
        size = min(_CHUNK, n - first)
        clusters = rng.choice(_CLUSTERS, size, p=shape.cluster_p)
        topics = shape.topic_of[clusters]
        weights = (rng.standard_normal((size, _RANK)) / np.sqrt(_RANK)).astype(np.float32)
        along = np.empty((size, dim), dtype=np.float32)
        for topic in np.unique(topics):
            rows = topics == topic
            along[rows] = weights[rows] @ shape.subspaces[topic]
        points = (
            shape.centres[clusters] + _SUBSPACE * along + _NOISE * _unit_rows(rng, size, dim)
        ) * shape.scale
        yield np.asarray(points / np.linalg.norm(points, axis=1, keepdims=True), dtype=np.float32)


def queries_near(vectors: np.ndarray, seed: int) -> np.ndarray:
    """Queries close to the given stored vectors, as a user's question is close to a memory."""
    rng = np.random.default_rng(seed)
    noisy = vectors + QUERY_SPREAD * rng.standard_normal(vectors.shape).astype(np.float32) / np.sqrt(
        vectors.shape[1]
    )
    return np.asarray(noisy / np.linalg.norm(noisy, axis=1, keepdims=True), dtype=np.float32)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nexo-bench"


def database_path(n: int, seed: int = 0) -> Path:
    schema = "+".join(migration.name for migration in VECTOR_MIGRATIONS)
    return cache_dir() / f"memory-recall-v{GENERATOR_VERSION}-{schema}-n{n}-seed{seed}.sqlite3"


async def cached_database(n: int, seed: int = 0) -> Path:
    """The path of a database holding the `n`-vector corpus for agent AGENT, built if missing."""
    path = database_path(n, seed)
    if path.exists():
        progress(f"memory recall: using the cached {n:,}-vector corpus at {path}")
        return path
    partial = path.with_name(path.name + ".partial")
    for stale in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        stale.unlink(missing_ok=True)
    progress(f"memory recall: generating a synthetic {n:,}-vector corpus into {path} (once; cached)")
    started = time.perf_counter()
    # synchronous=OFF: a half-built file is never renamed into place, so losing it costs a rebuild only.
    async with Database.open(partial, VECTOR_MIGRATIONS, synchronous="OFF") as db:
        index = VectorIndex(db, DIM)
        next_id = 1
        for chunk in synthetic_chunks(n, seed):
            async with db.transaction() as tx:
                await index.add_many(tx, [(next_id + i, AGENT, vector) for i, vector in enumerate(chunk)])
            next_id += len(chunk)
            if next_id % 200_000 < _CHUNK or next_id > n:
                elapsed = time.perf_counter() - started
                progress(f"memory recall: {next_id - 1:,}/{n:,} vectors written ({elapsed:.0f}s)")
    partial.rename(path)
    return path
