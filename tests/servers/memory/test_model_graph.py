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
from servers.memory.model_graph import ModelGraphError, RewrittenModel, gather_rows_before_scaling
from servers.memory.protobuf_wire import encode_bytes, encode_varint, fields, packed_varints

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


# --- the rewrite on small graphs written here -------------------------------------------------------


def encode_int(number: int, value: int) -> bytes:
    return encode_varint(number << 3) + encode_varint(value)


def attribute(name: str, value: int) -> bytes:
    return encode_bytes(5, encode_bytes(1, name.encode()) + encode_int(3, value) + encode_int(20, 2))


def node(op_type: str, inputs: list[str], output: str, *attributes: bytes) -> bytes:
    parts = [encode_bytes(1, name.encode()) for name in inputs]
    parts += [encode_bytes(2, output.encode()), encode_bytes(4, op_type.encode()), *attributes]
    return encode_bytes(1, b"".join(parts))


def tensor(name: str, dims: tuple[int, ...], data_type: int) -> bytes:
    parts = [encode_int(1, dim) for dim in dims] + [encode_int(2, data_type), encode_bytes(8, name.encode())]
    return encode_bytes(5, b"".join(parts))


def model(*graph_fields: bytes) -> bytes:
    graph = b"".join(graph_fields) + encode_bytes(11, encode_bytes(1, b"ids"))
    return encode_int(1, 8) + encode_bytes(7, graph) + encode_bytes(8, encode_int(2, 17))


TABLE = (tensor("q", (4, 2), INT8), tensor("s", (4, 1), FLOAT))
DEQUANTIZE = (node("Cast", ["q"], "qf", attribute("to", FLOAT)), node("Mul", ["qf", "s"], "w"))


def op_types(rewritten: bytes) -> list[tuple[str, list[str], str]]:
    graph = next(field for field in fields(memoryview(rewritten)) if field.number == 7)
    found = []
    for entry in (field for field in fields(graph.value) if field.number == 1):
        parts = list(fields(entry.value))
        found.append(
            (
                next(f.text() for f in parts if f.number == 4),
                [f.text() for f in parts if f.number == 1],
                next(f.text() for f in parts if f.number == 2),
            )
        )
    return found


def test_a_gather_over_a_scaled_int8_table_gathers_rows_then_scales_them() -> None:
    rewritten = gather_rows_before_scaling(model(*TABLE, *DEQUANTIZE, node("Gather", ["w", "ids"], "out")))
    assert rewritten.gathered_tables == ("q",)
    assert op_types(rewritten.model) == [
        ("Gather", ["q", "ids"], "out/int8_rows"),
        ("Gather", ["s", "ids"], "out/row_scales"),
        ("Cast", ["out/int8_rows"], "out/rows"),
        ("Mul", ["out/rows", "out/row_scales"], "out"),
    ]
    assert initializers(rewritten.model) == initializers(model(*TABLE))


@pytest.mark.parametrize(
    "graph",
    [
        pytest.param((*DEQUANTIZE, node("Gather", ["w", "ids"], "out", attribute("axis", 1))), id="axis 1"),
        pytest.param(
            (*DEQUANTIZE, node("Gather", ["w", "ids"], "out"), node("Shape", ["w"], "shape")),
            id="table used twice",
        ),
        pytest.param(
            (
                node("Cast", ["q"], "qf", attribute("to", 10)),
                DEQUANTIZE[1],
                node("Gather", ["w", "ids"], "out"),
            ),
            id="cast to float16",
        ),
        pytest.param((DEQUANTIZE[1], node("Gather", ["w", "ids"], "out")), id="no cast"),
    ],
)
def test_other_graphs_are_left_byte_for_byte_as_they_were(graph: tuple[bytes, ...]) -> None:
    original = model(*TABLE, *graph)
    assert gather_rows_before_scaling(original) == RewrittenModel(original, ())


def test_a_graph_that_already_has_a_value_of_a_new_name_is_refused() -> None:
    taken = node("Identity", ["ids"], "out/rows")
    with pytest.raises(ModelGraphError, match="already has a value named 'out/rows'"):
        gather_rows_before_scaling(model(*TABLE, taken, *DEQUANTIZE, node("Gather", ["w", "ids"], "out")))
