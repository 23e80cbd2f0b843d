"""Vectors for recall at scale without an embedding model: a text's words hashed to fixed directions.

Every word picks one of ``BUCKETS`` fixed random directions (crc32 of the folded word) and a text's
vector is their sum, normalised: a question sharing most of its target's words lands near it, as a
paraphrase lands near its source for a sentence model. bench.recall_scale builds its stores with
these, and the memory server it starts for the MCP figures embeds questions with the same
directions (``HashedModel``), read from a cached file through a memory map so the server holds only
the pages of the words it was asked about, not the 100 MB table.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from servers.memory.models import Vector

DIM = 384
BUCKETS = 1 << 16
SEED = 11
MODEL_ID = f"recall-scale-hashed-words-v1-{BUCKETS}x{DIM}"
_WORD = re.compile(r"[^\W_]+")


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "nexo-bench"


def directions_path() -> Path:
    return cache_dir() / f"{MODEL_ID}-seed{SEED}.npy"


def unit(rows: np.ndarray) -> np.ndarray:
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


class HashedEmbedder:
    """A text's vector: the normalised sum of one fixed random direction per word."""

    def __init__(self, directions: np.ndarray | None = None) -> None:
        if directions is None:
            directions = np.random.default_rng(SEED).standard_normal((BUCKETS, DIM), dtype=np.float32)
        self._directions = directions

    @classmethod
    def mapped(cls) -> HashedEmbedder:
        """The same directions, written to the cache once and mapped from there (read-only)."""
        path = directions_path()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial.npy")
            np.save(partial, cls()._directions)
            partial.replace(path)
        return cls(np.load(path, mmap_mode="r"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return unit(self.sums(texts))

    def sums(self, texts: Sequence[str]) -> np.ndarray:
        """The word directions of each text summed, not normalised: a pair's is the sum of its two."""
        buckets: list[int] = []
        starts: list[int] = []
        for text in texts:
            starts.append(len(buckets))
            buckets += [
                zlib.crc32(word.encode()) % BUCKETS for word in _WORD.findall(text.casefold()) or ["-"]
            ]
        return np.add.reduceat(self._directions[np.asarray(buckets)], np.asarray(starts), axis=0)

    async def embed_one(self, text: str) -> Vector:
        vector: Vector = self.embed([text])[0]
        return vector


class HashedModel:
    """``HashedEmbedder`` as the memory server's ``Embedder``: nothing to load, nothing to close."""

    def __init__(self, embedder: HashedEmbedder) -> None:
        self._embedder = embedder

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    async def start(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embedder.embed(texts)

    async def aclose(self) -> None:
        return None
