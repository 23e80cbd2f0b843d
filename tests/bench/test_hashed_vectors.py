"""The hashed-word vectors bench.recall_scale builds its stores with, and the memory server it
starts over MCP embeds questions with: the same vectors from the mapped file as from the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.hashed_vectors import DIM, MODEL_ID, HashedEmbedder, HashedModel, directions_path

pytestmark = pytest.mark.anyio

TEXTS = ["Ana keeps the kayak in the garden", "kayak garden", "SN-4411-B", ""]


async def test_the_servers_embedder_maps_the_cached_directions_and_gives_the_benchmarks_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = HashedEmbedder()
    mapped = HashedEmbedder.mapped()
    assert directions_path().is_relative_to(tmp_path)
    again = HashedEmbedder.mapped()
    model = HashedModel(again)
    assert (model.model_id, model.dim) == (MODEL_ID, DIM)
    expected = built.embed(TEXTS)
    np.testing.assert_array_equal(mapped.embed(TEXTS), expected)
    np.testing.assert_array_equal(await model.embed(TEXTS), expected)
    assert np.allclose(np.linalg.norm(expected, axis=1), 1.0)
    # A question sharing most of its target's words lands nearer to it than to the others.
    similarity = expected @ expected[1]
    assert int(np.argmax(similarity[[0, 2]])) == 0
