"""The int8 weights of the local model stay int8 once loaded, and its vectors hardly change.

The tables' rewrite changes no bit of a vector; the matrices' (multiplied in integers, the
activations quantised per run) moves each vector by a little, bounded here.
"""

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
    run_each_text,
    session_options,
)
from servers.memory.embeddings import unit_rows
from servers.memory.model_graph import ModelGraphError, RewrittenModel, rewrite_model
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


def load(model: bytes, folder: Path, *, rewrite: str) -> Loaded:
    options = session_options()
    optimized = folder / f"{rewrite}.onnx"
    options.optimized_model_filepath = str(optimized)
    if rewrite == "loaded":
        return Loaded(build_session(model, options), optimized)
    if rewrite == "tables only":
        return Loaded(build_session(model, options, integer_matmuls=False), optimized)
    # How the server loaded the model before: the file's graph as it ships.
    return Loaded(onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"]), optimized)


@pytest.fixture(scope="module")
def unchanged(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load(model_bytes, tmp_path_factory.mktemp("unchanged"), rewrite="unchanged")


@pytest.fixture(scope="module")
def tables_only(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load(model_bytes, tmp_path_factory.mktemp("tables"), rewrite="tables only")


@pytest.fixture(scope="module")
def rewritten(model_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load(model_bytes, tmp_path_factory.mktemp("rewritten"), rewrite="loaded")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def sentence_vectors(session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    out = np.empty((len(texts), 384), dtype=np.float32)
    for batch in batches(tokenizer.encode_batch(texts), max_rows=4):
        hidden = run_each_text(session, batch)  # as the server runs them: a text per run
        out[batch.rows] = unit_rows(mean_pooled(hidden, batch.attention_mask), "test")
    return out


def test_looking_up_int8_table_rows_gives_the_vectors_of_the_unchanged_graph_to_the_bit(
    unchanged: Loaded, tables_only: Loaded, tokenizer: Any
) -> None:
    expected = sentence_vectors(unchanged.session, tokenizer, TEXTS)
    actual = sentence_vectors(tables_only.session, tokenizer, TEXTS)
    assert np.abs(expected - actual).max() <= 1e-6


def test_integer_matrices_move_each_vector_by_little_and_keep_what_is_nearest(
    unchanged: Loaded, rewritten: Loaded, tokenizer: Any
) -> None:
    expected = sentence_vectors(unchanged.session, tokenizer, TEXTS)
    actual = sentence_vectors(rewritten.session, tokenizer, TEXTS)
    cosines = np.sum(expected * actual, axis=1)
    assert cosines.min() >= 0.98, dict(zip(TEXTS, cosines.tolist(), strict=True))
    assert cosines.max() < 0.99999  # the matrices are multiplied in integers: not the same to the bit
    # A question asked of the loaded model finds the fact the float graph stored for it, and each
    # text's own float vector is nearer to its new one than any other text's.
    similarities = actual @ expected.T
    assert int(np.argmax(similarities[0, 1:])) + 1 == TEXTS.index("Ana was born on 14 March 1990 in Lisbon.")
    assert list(np.argmax(similarities, axis=1)) == list(range(len(TEXTS)))


def test_the_loaded_session_holds_no_float_copy_of_an_int8_weight(
    model_bytes: bytes, unchanged: Loaded, rewritten: Loaded
) -> None:
    shipped = {item.name: item for item in initializers(model_bytes)}
    graph = rewrite_model(model_bytes)
    assert "inner.embeddings.word_embeddings.weight_q" in graph.gathered_tables
    # Six layers of four attention matrices and two feed-forward ones.
    assert len(graph.integer_matrices) == 36
    int8_weights = (*graph.gathered_tables, *graph.integer_matrices)
    assert all(shipped[name].data_type == INT8 for name in int8_weights)
    shapes = {shipped[name].dims for name in int8_weights}

    def weights_held(loaded: Loaded) -> set[tuple[tuple[int, ...], int]]:
        return {(item.dims, item.data_type) for item in initializers(loaded.optimized.read_bytes())}

    # The check finds the float32 copies constant folding makes of the graph as it ships...
    assert {(shape, FLOAT) for shape in shapes} <= weights_held(unchanged)
    # ...and none in the session the server loads: its weights of those shapes are the int8 ones.
    held = {(item.name, item.data_type) for item in initializers(rewritten.optimized.read_bytes())}
    assert not {(shape, FLOAT) for shape in shapes} & weights_held(rewritten)
    assert {(name, INT8) for name in int8_weights} <= held


def test_bytes_that_are_not_an_onnx_model_are_refused_naming_the_problem() -> None:
    with pytest.raises(ModelGraphError, match="not a readable ONNX file: the varint at byte 0 runs past"):
        rewrite_model(b"\xff")
    with pytest.raises(ModelGraphError, match="has 0 graphs, expected one"):
        rewrite_model(b"\x08\x07")  # ir_version 7 and nothing else


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
    rewritten = rewrite_model(model(*TABLE, *DEQUANTIZE, node("Gather", ["w", "ids"], "out")))
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
    assert rewrite_model(original) == RewrittenModel(original, ())


def test_a_graph_that_already_has_a_value_of_a_new_name_is_refused() -> None:
    taken = node("Identity", ["ids"], "out/rows")
    with pytest.raises(ModelGraphError, match="already has a value named 'out/rows'"):
        rewrite_model(model(*TABLE, taken, *DEQUANTIZE, node("Gather", ["w", "ids"], "out")))


MATRIX = (tensor("m", (3, 2), INT8), tensor("c", (1, 2), FLOAT))
TO_FLOAT = (node("Cast", ["m"], "mf", attribute("to", FLOAT)), node("Mul", ["mf", "c"], "b"))


def node_domains(rewritten: bytes) -> list[str]:
    graph = next(field for field in fields(memoryview(rewritten)) if field.number == 7)
    return [
        next((f.text() for f in fields(entry.value) if f.number == 7), "")
        for entry in fields(graph.value)
        if entry.number == 1
    ]


def opset_imports(rewritten: bytes) -> list[tuple[str, int]]:
    found = []
    for entry in (field for field in fields(memoryview(rewritten)) if field.number == 8):
        parts = list(fields(entry.value))
        domain = next((f.text() for f in parts if f.number == 1), "")
        found.append((domain, next(f.varint() for f in parts if f.number == 2)))
    return found


def test_a_matmul_by_a_scaled_int8_matrix_multiplies_the_int8_matrix_in_integers() -> None:
    original = model(*MATRIX, *TO_FLOAT, node("MatMul", ["ids", "b"], "out"))
    rewritten = rewrite_model(original)
    assert rewritten.integer_matrices == ("m",)
    assert rewritten.gathered_tables == ()
    assert op_types(rewritten.model) == [("DynamicQuantizeMatMul", ["ids", "m", "c"], "out")]
    assert node_domains(rewritten.model) == ["com.microsoft"]
    assert initializers(rewritten.model) == initializers(model(*MATRIX))
    assert opset_imports(rewritten.model) == [("", 17), ("com.microsoft", 1)]
    # The tables alone, when asked: the matrix stays as it ships.
    assert rewrite_model(original, integer_matmuls=False) == RewrittenModel(original, ())


def test_a_model_that_already_imports_the_integer_operators_imports_them_once() -> None:
    imported = encode_bytes(8, encode_bytes(1, b"com.microsoft") + encode_int(2, 1))
    rewritten = rewrite_model(model(*MATRIX, *TO_FLOAT, node("MatMul", ["ids", "b"], "out")) + imported)
    assert opset_imports(rewritten.model) == [("", 17), ("com.microsoft", 1)]


@pytest.mark.parametrize(
    "graph",
    [
        pytest.param(
            (
                tensor("m", (3, 2), INT8),
                tensor("c", (3, 1), FLOAT),
                *TO_FLOAT,
                node("MatMul", ["ids", "b"], "out"),
            ),
            id="a scale per row",
        ),
        pytest.param(
            (tensor("m", (3, 2), 2), MATRIX[1], *TO_FLOAT, node("MatMul", ["ids", "b"], "out")),
            id="uint8 matrix",
        ),
        pytest.param((*MATRIX, *TO_FLOAT, node("MatMul", ["b", "ids"], "out")), id="matrix on the left"),
        pytest.param(
            (*MATRIX, tensor("k", (2, 3), FLOAT), *TO_FLOAT, node("MatMul", ["k", "b"], "out")),
            id="constant times constant",
        ),
        pytest.param(
            (*MATRIX, *TO_FLOAT, node("MatMul", ["ids", "b"], "out"), node("Shape", ["b"], "shape")),
            id="matrix used twice",
        ),
    ],
)
def test_other_matmuls_are_left_byte_for_byte_as_they_were(graph: tuple[bytes, ...]) -> None:
    original = model(*graph)
    assert rewrite_model(original) == RewrittenModel(original, ())
