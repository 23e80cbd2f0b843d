"""The local embedding model as the server loads it, beside the graph as its file ships.

The server rewrites the model's graph at load so its int8 weights stay int8 (`servers/memory/
model_graph.py`: the tables' rows are looked up before scaling, the layers' matrices multiplied in
integers); the baseline column is a session of the unchanged file with the same options,
built in the same run. Rows: the initializers each session holds after ONNX Runtime's optimisation
(read from the optimised graph ONNX Runtime saves, so exact), and the CPU time of a short query,
of one text of the model's full 256 tokens and of 64 real sentences, each text a run of its own on
one thread as the server runs them (`run_each_text`; process CPU time: wall time on a shared
machine says more about the neighbours). The vectors of
both sessions are compared on real sentences: the integer matrices move each vector a little, and
the row set fails if any cosine is under 0.97 (the lowest and the median are printed).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.memory_server import cached_corpus
from bench.stats import Result
from bench.support import describe, progress
from servers.memory.batching import Batch, batches, mean_pooled
from servers.memory.embedding_local import (
    MAX_TOKENS,
    TOKENIZER_PATH,
    _default_model_path,
    build_session,
    run_each_text,
    session_options,
)
from servers.memory.embeddings import unit_rows
from servers.memory.protobuf_wire import fields, packed_varints

MIN_COSINE = 0.97
QUERY = "when is Ana's birthday"
BASELINE = "the model file's graph as it ships, same options"
_SIZES = {1: 4, 2: 1, 3: 1, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8}
"""Bytes per element of ONNX's tensor types: float, uint8, int8, int32, int64, bool, float16, double."""


def held_initializers_mb(optimized: bytes) -> float:
    """MB of the initializers of an ONNX model (dims times element size, as a session holds them)."""
    graph = next(field for field in fields(memoryview(optimized)) if field.number == 7)
    total = 0
    for tensor in (field for field in fields(graph.value) if field.number == 5):
        parts = list(fields(tensor.value))
        count = int(np.prod([d for f in parts if f.number == 1 for d in packed_varints(f)]))
        data_type = next((f.varint() for f in parts if f.number == 2), 0)
        total += count * _SIZES.get(data_type, 0)
    return total / 2**20


def _cpu_ms(session: Any, batch: Batch) -> float:
    begun = time.process_time()
    run_each_text(session, batch)
    return (time.process_time() - begun) * 1000


def _vectors(session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    out = np.empty((len(texts), 384), dtype=np.float32)
    for batch in batches(tokenizer.encode_batch(texts), 32):
        hidden = run_each_text(session, batch)
        out[batch.rows] = unit_rows(mean_pooled(hidden, batch.attention_mask), "bench")
    return out


def _measure(quick: bool) -> list[Result]:
    # Imported here, not with the bench: the other measurements need neither.
    import onnxruntime  # type: ignore[import-untyped]  # ships no type hints
    from tokenizers import Tokenizer

    sentences = cached_corpus(2_000).sentences
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    model = _default_model_path().read_bytes()
    sessions: dict[str, Any] = {}
    held: dict[str, float] = {}
    builders: dict[str, Callable[[bytes, Any], Any]] = {
        "as loaded": build_session,
        "as shipped": lambda data, options: onnxruntime.InferenceSession(
            data, options, providers=["CPUExecutionProvider"]
        ),
    }
    with tempfile.TemporaryDirectory(prefix="nexo-bench-embedding-") as folder:
        for label, build in builders.items():
            options = session_options()
            optimized = Path(folder) / f"{label}.onnx"
            options.optimized_model_filepath = str(optimized)
            sessions[label] = build(model, options)
            held[label] = held_initializers_mb(optimized.read_bytes())
    compared = sentences[: 200 if quick else 1_000]
    progress(f"embedding model: vectors of {len(compared)} sentences from both sessions")
    cosines = np.sum(
        _vectors(sessions["as loaded"], tokenizer, compared)
        * _vectors(sessions["as shipped"], tokenizer, compared),
        axis=1,
    )
    inputs = {
        "short query (CPU ms)": next(batches(tokenizer.encode_batch([QUERY]), 1)),
        "one text of 256 tokens (CPU ms)": next(
            batches(tokenizer.encode_batch([" ".join(sentences[:40])]), 1)
        ),
        "64 sentences, a run each (CPU ms)": next(batches(tokenizer.encode_batch(sentences[100:164]), 64)),
    }
    repeats = {"short": 30, "one text": 6, "64": 2} if quick else {"short": 100, "one text": 20, "64": 6}
    results = [
        Result(
            "embedding model: initializers held after optimisation",
            "MB",
            BASELINE,
            samples=[held["as loaded"]],
            baseline=[held["as shipped"]],
        )
    ]
    for name, batch in inputs.items():
        n = next(count for prefix, count in repeats.items() if name.startswith(prefix))
        progress(f"embedding model: {name}, {n} runs of each session, alternating")
        ours: list[float] = []
        base: list[float] = []
        for _ in range(n):
            ours.append(_cpu_ms(sessions["as loaded"], batch))
            base.append(_cpu_ms(sessions["as shipped"], batch))
        results.append(
            Result(
                f"embedding model: {name}",
                "ms",
                BASELINE,
                samples=ours,
                baseline=base,
                relative_target=(1.1, 1.0),
            )
        )
    if cosines.min() < MIN_COSINE:
        results[0].errors.append(
            f"the vectors differ from the shipped graph's: cosine {cosines.min():.6f} < {MIN_COSINE} "
            f"for {compared[int(cosines.argmin())]!r}"
        )
    progress(
        f"embedding model: cosine to the shipped graph's vectors: lowest {cosines.min():.4f}, "
        f"median {float(np.median(cosines)):.4f}"
    )
    return results


def measure(quick: bool) -> list[Result]:
    try:
        return _measure(quick)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        failed = Result("embedding model", "-", "-")
        failed.errors.append(f"the measurement failed: {describe(exc)}")
        return [failed]
