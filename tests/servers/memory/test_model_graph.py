"""The embedding tables of the local model stay int8 once loaded, and its vectors do not change."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime  # type: ignore[import-untyped]  # ships no type hints
import pytest
from tokenizers import Tokenizer

from servers.memory.batching import batches, mean_pooled
from servers.memory.embedding_local import (
    MAX_TOKENS,
    TOKENIZER_PATH,
    _default_model_path,
    build_session,
    default_threads,
    session_options,
)
from servers.memory.embeddings import unit_rows
from servers.memory.model_graph import ModelGraphError, gather_rows_before_scaling
from servers.memory.protobuf_wire import fields, packed_varints

TEXTS = [
    "when is Ana's birthday",
    "Ana was born on 14 March 1990 in Lisbon.",
    "The deploy key for the staging cluster rotates every ninety days.",
    "Prefers tea over coffee, no sugar.",
    "Rendez-vous chez le dentiste jeudi à 15 h.",
    "東京駅で待ち合わせ",
    "x",
    # Past the model's 256 tokens, so every position embedding row is read.
    " ".join(f"item {n} of the long shopping list for the trip to the mountains" for n in range(60)),
]
FLOAT = 1
INT8 = 3


@dataclass(frozen=True, slots=True)
class Initializer:
    name: str
    dims: tuple[int, ...]
    data_type: int


def initializers(model: bytes) -> list[Initializer]:
    """The graph initializers of an ONNX model, read with the same wire reader as the rewrite."""
    found: list[Initializer] = []
    graph = next(field for field in fields(memoryview(model)) if field.number == 7)
    for tensor in (field for field in fields(graph.value) if field.number == 5):
        parts = list(fields(tensor.value))
        found.append(
            Initializer(
                name=next(f.text() for f in parts if f.number == 8),
                dims=tuple(d for f in parts if f.number == 1 for d in packed_varints(f)),
                data_type=next(f.varint() for f in parts if f.number == 2),
            )
        )
    return found


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return _default_model_path().read_bytes()


@dataclass(frozen=True, slots=True)
class Loaded:
    session: Any
    optimized: Path
    """The graph the session runs, after ONNX Runtime's optimisation, as ONNX Runtime saved it."""


def load(model: bytes, folder: Path, *, rewrite: bool) -> Loaded:
    options = session_options(default_threads())
    optimized = folder / ("rewritten.onnx" if rewrite else "unchanged.onnx")
    options.optimized_model_filepath = str(optimized)
    if rewrite:
        return Loaded(build_session(model, options), optimized)
    # How the server loaded the model before: the file's graph as it ships.
    return Loaded(onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"]), optimized)


@pytest.fixture(scope="module")
def unchanged(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load(model_bytes, tmp_path_factory.mktemp("unchanged"), rewrite=False)


@pytest.fixture(scope="module")
def rewritten(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load(model_bytes, tmp_path_factory.mktemp("rewritten"), rewrite=True)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def sentence_vectors(session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    out = np.empty((len(texts), 384), dtype=np.float32)
    for batch in batches(tokenizer.encode_batch(texts), max_rows=4):
        feed = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": np.zeros_like(batch.input_ids),
        }
        (hidden,) = session.run(["last_hidden_state"], feed)
        out[batch.rows] = unit_rows(mean_pooled(hidden, batch.attention_mask), "test")
    return out


def test_the_loaded_model_gives_the_vectors_of_the_unchanged_graph(
    unchanged: Loaded, rewritten: Loaded, tokenizer: Any
) -> None:
    expected = sentence_vectors(unchanged.session, tokenizer, TEXTS)
    actual = sentence_vectors(rewritten.session, tokenizer, TEXTS)
    cosines = np.sum(expected * actual, axis=1)
    assert cosines.min() >= 0.9999, dict(zip(TEXTS, cosines.tolist(), strict=True))
    assert np.abs(expected - actual).max() <= 1e-6


def test_the_loaded_session_holds_no_float_copy_of_an_embedding_table(
    model_bytes: bytes, unchanged: Loaded, rewritten: Loaded
) -> None:
    shipped = {item.name: item for item in initializers(model_bytes)}
    gathered = gather_rows_before_scaling(model_bytes).gathered_tables
    assert "inner.embeddings.word_embeddings.weight_q" in gathered
    assert all(shipped[name].data_type == INT8 for name in gathered)
    table_shapes = {shipped[name].dims for name in gathered}

    def tables_held(loaded: Loaded) -> list[Initializer]:
        return [item for item in initializers(loaded.optimized.read_bytes()) if item.dims in table_shapes]

    # The check finds the float32 copies constant folding makes of the graph as it ships...
    assert {(item.dims, item.data_type) for item in tables_held(unchanged)} == {
        (shape, FLOAT) for shape in table_shapes
    }
    # ...and only the int8 tables in the session the server loads.
    assert sorted((item.name, item.data_type) for item in tables_held(rewritten)) == sorted(
        (name, INT8) for name in gathered
    )


def test_bytes_that_are_not_an_onnx_model_are_refused_naming_the_problem() -> None:
    with pytest.raises(ModelGraphError, match="not a readable ONNX file: the varint at byte 0 runs past"):
        gather_rows_before_scaling(b"\xff")
    with pytest.raises(ModelGraphError, match="has 0 graphs, expected one"):
        gather_rows_before_scaling(b"\x08\x07")  # ir_version 7 and nothing else
