"""Batches for a transformer embedder: tokenize once, group texts of similar token length, pad per batch.

Texts are sorted by their token count (not their character count, which tracks it loosely) and
each batch is padded only to its own longest row. A batch is closed at ``max_rows`` rows or when
its padded size would pass ``max_cells`` tokens, so a run of long texts makes smaller batches
instead of one huge tensor. The tokenizer's output is reused as it is: no text is tokenized twice.
The local model runs each text of a batch on its own (`embedding_local.run_each_text`), so a batch
is the work one thread takes at a time, and its padded tensors hold the texts' ids and states.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

MAX_CELLS = 16_384
"""Padded tokens per batch: 64 rows of 256 tokens, or 512 rows of 32."""


class Encoding(Protocol):
    """What is used of a ``tokenizers.Encoding``."""

    @property
    def ids(self) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class Batch:
    rows: list[int]
    """Positions of these texts in the input, in the order of the tensor's rows."""
    input_ids: np.ndarray
    attention_mask: np.ndarray

    @property
    def tokens(self) -> int:
        """Real (unpadded) tokens in the batch."""
        return int(self.attention_mask.sum())


def batches(encodings: Sequence[Encoding], max_rows: int, max_cells: int = MAX_CELLS) -> Iterator[Batch]:
    """``encodings`` (unpadded) as int64 batches, shortest first; see the module docstring."""
    if max_rows < 1 or max_cells < 1:
        raise ValueError(f"max_rows={max_rows!r} and max_cells={max_cells!r} must be >= 1")
    lengths = [max(1, len(encoding.ids)) for encoding in encodings]
    order = sorted(range(len(encodings)), key=lambda i: (lengths[i], i))
    chosen: list[int] = []
    for index in order:
        # Sorted ascending, so the row being added is the batch's longest.
        if chosen and (len(chosen) >= max_rows or (len(chosen) + 1) * lengths[index] > max_cells):
            yield _batch(chosen, encodings)
            chosen = []
        chosen.append(index)
    if chosen:
        yield _batch(chosen, encodings)


def _batch(rows: list[int], encodings: Sequence[Encoding]) -> Batch:
    width = max(len(encodings[i].ids) for i in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for row, index in enumerate(rows):
        tokens = encodings[index].ids
        ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return Batch(rows=rows, input_ids=ids, attention_mask=mask)


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Token states averaged over the attention mask (sentence-transformers' mean pooling)."""
    weights = mask[:, :, np.newaxis].astype(np.float32)
    pooled: np.ndarray = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled
