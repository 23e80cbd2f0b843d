"""Batching for the local model: tokenized once, grouped by token length, padded per batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import numpy as np
import pytest

from servers.memory.batching import batches, mean_pooled
from servers.memory.embedding_local import LocalEmbedder

pytestmark = pytest.mark.anyio


@dataclass
class Tokens:
    ids: list[int]


def of_lengths(*lengths: int) -> list[Tokens]:
    return [Tokens(list(range(1, n + 1))) for n in lengths]


def test_texts_are_grouped_by_token_length_and_padded_only_to_their_batch() -> None:
    made = list(batches(of_lengths(9, 2, 5, 3, 8, 2), max_rows=2))
    assert [b.rows for b in made] == [[1, 5], [3, 2], [4, 0]]
    assert [b.input_ids.shape for b in made] == [(2, 2), (2, 5), (2, 9)]
    assert [b.tokens for b in made] == [4, 8, 17]
    assert made[1].input_ids.tolist() == [[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]
    assert made[1].attention_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_a_batch_of_long_texts_is_cut_at_the_padded_token_budget() -> None:
    made = list(batches(of_lengths(*([4] * 6), *([100] * 5)), max_rows=64, max_cells=256))
    assert [len(b.rows) for b in made] == [6, 2, 2, 1]
    assert all(b.input_ids.size <= 256 for b in made)
    assert sorted(row for b in made for row in b.rows) == list(range(11))


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="max_rows=0"):
        list(batches(of_lengths(1), max_rows=0))


def test_mean_pooling_ignores_padding() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    assert mean_pooled(hidden, mask).tolist() == [[2.0, 3.0]]


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    embedder = LocalEmbedder(batch_size=2)
    anyio.run(embedder.start)
    yield embedder
    anyio.run(embedder.aclose)


async def test_the_model_tokenizes_without_padding_so_batches_pad_to_their_own_longest(
    local: LocalEmbedder,
) -> None:
    texts = ["tea", "Ana's daughter starts school in September and needs new shoes", "ok"]
    encodings = await local.tokenize(texts)
    assert [len(e.ids) for e in encodings] == [3, 14, 3]
    made = list(batches(encodings, max_rows=2))
    assert [(b.rows, b.input_ids.shape[1]) for b in made] == [([0, 2], 3), ([1], 14)]
    hidden = await local.infer(made[1])
    assert hidden.shape == (1, 14, 384)
