"""Vectors from any OpenAI-compatible `POST {base_url}/embeddings` (OpenAI, Ollama, vLLM, llama.cpp, ...).

Wire format: the request is `{"model", "input": [texts], "dimensions"?}`, the answer
`{"data": [{"index", "embedding"}], "usage"}`. Rows are put back in input order by `index` and
scaled to unit length (not every server normalises). HTTP 408, 429 and 5xx and network errors are
retried with full-jitter exponential backoff, or after the server's Retry-After when it sends one.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

from servers.memory.embeddings import REMOTE_BATCH_SIZE, EmbeddingError, check_texts, unit_rows

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger("nexo.memory.embeddings")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
RETRY_AFTER_CAP_S = 60.0
PROBE_TEXT = "dimension probe"
_MAX_DETAIL_CHARS = 300
# Jitter only spreads retries out; it needs no cryptographic strength.
_jitter = random.SystemRandom()


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped; None if unusable."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def _retryable(status: int) -> bool:
    return status in (408, 429) or 500 <= status <= 599


class _WireError(ValueError):
    """A 2xx body that is not the embeddings wire format."""


def _rows(data: object, expected: int) -> list[list[float]]:
    """The embeddings of a decoded response body, in input order."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise _WireError('the body should be an object with a "data" array')
    items: list[Any] = data["data"]
    if len(items) != expected:
        raise _WireError(f"data has {len(items)} item(s) for {expected} input(s)")
    by_index: dict[int, list[float]] = {}
    for position, item in enumerate(items):
        index = item.get("index") if isinstance(item, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
            raise _WireError(f"data[{position}].index should be an integer from 0 to {expected - 1}")
        if index in by_index:
            raise _WireError(f"data[{position}].index {index} repeats")
        embedding = item.get("embedding")
        if not isinstance(embedding, list) or not embedding:
            raise _WireError(f"data[{position}].embedding should be a non-empty array of numbers")
        by_index[index] = embedding
    return [by_index[index] for index in range(expected)]


class OpenAICompatEmbedder:
    """An OpenAI-compatible embeddings endpoint; `dim` is probed by `start()` unless `dimensions` is set."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = REMOTE_BATCH_SIZE,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        transport: httpx2.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        jitter: Callable[[], float] = _jitter.random,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if batch_size < 1 or max_retries < 0:
            raise ValueError(f"batch_size={batch_size!r} must be >= 1 and max_retries={max_retries!r} >= 0")
        self.model_id = f"openai_compat:{model}"
        self.model = model
        self.url = f"{base_url.rstrip('/')}/embeddings"
        self.batch_size = batch_size
        self.max_retries = max_retries
        self._dimensions = dimensions
        self._dim = dimensions
        self._api_key = api_key
        self._sleep = sleep
        self._jitter = jitter
        self._now = now
        self._client = httpx2.AsyncClient(timeout=timeout_s, transport=transport)

    def __repr__(self) -> str:
        return f"<OpenAICompatEmbedder {self.model_id} at {self.url}>"

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise EmbeddingError(
                f"the vector size of {self.model_id} at {self.url} is not known yet. "
                "Fix: await start() first (it asks the endpoint), or set dimensions"
            )
        return self._dim

    async def start(self) -> None:
        """Embed one short text: proves the endpoint, the key and the model work, and learns `dim`."""
        await self._request([PROBE_TEXT])

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np  # comes with the first embedding, not with the server (see `vectors`)

        listed = check_texts(texts)
        if not listed:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [
            await self._request(listed[first : first + self.batch_size])
            for first in range(0, len(listed), self.batch_size)
        ]
        return np.concatenate(parts)

    async def _request(self, batch: list[str]) -> np.ndarray:
        import numpy as np  # see embed()

        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        response = await self._send(body)
        if not response.is_success:
            raise self._rejected(response)
        try:
            matrix = np.array(_rows(response.json(), len(batch)), dtype=np.float32)
            if matrix.ndim != 2:
                raise _WireError("each embedding should be a flat array of numbers")
        except (ValueError, TypeError) as exc:  # _WireError, JSON, ragged or non-numeric embeddings
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered HTTP {response.status_code} with a body that "
                f"is not the OpenAI embeddings format: {exc}. Fix: check that base_url points at an "
                "OpenAI-compatible API root (usually ending in /v1)"
            ) from exc
        if self._dim is None:
            self._dim = matrix.shape[1]
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} returned {matrix.shape[1]}-dimensional vectors for "
                f"model {self.model!r}, expected {self._dim}. Fix: set dimensions to what the model "
                "returns, or choose a model that honours it"
            )
        return unit_rows(matrix, f"the embeddings endpoint {self.url}")

    async def _send(self, body: dict[str, Any]) -> httpx2.Response:
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            wait: float | None = None
            try:
                response = await self._client.post(self.url, json=body, headers=headers)
            except httpx2.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except httpx2.RequestError as exc:  # not transient: an undecodable body, a redirect loop
                raise EmbeddingError(
                    f"the embeddings endpoint {self.url} sent a reply that cannot be read "
                    f"({type(exc).__name__}: {exc}). Fix: check that base_url points at an "
                    "OpenAI-compatible API root (usually ending in /v1), not a proxy or web page"
                ) from exc
            else:
                if not _retryable(response.status_code):
                    return response
                failure = f"HTTP {response.status_code}"
                detail = self._detail(response)
                if detail:
                    failure = f"{failure}: {detail}"
                wait = retry_after_seconds(response.headers.get("retry-after"), self._now())
            if attempt >= self.max_retries:
                raise EmbeddingError(
                    f"the embeddings endpoint {self.url} failed {attempt + 1} time(s); last error: "
                    f"{failure}. Fix: check the embedding server is running and reachable at base_url, "
                    "or raise max_retries / timeout_s if it is only slow or rate-limited"
                )
            if wait is None:
                wait = self._jitter() * min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0**attempt)
            # The reason is a status or an exception: never a body that could echo the key.
            logger.warning(
                "embeddings endpoint %s attempt %d/%d failed (%s); retrying in %.2fs",
                self.url,
                attempt + 1,
                self.max_retries + 1,
                failure.split(":", 1)[0],
                wait,
            )
            await self._sleep(wait)
            attempt += 1

    def _detail(self, response: httpx2.Response) -> str:
        """The server's own error message, shortened, with the API key redacted."""
        try:
            data: object = response.json()
        except ValueError:
            data = None
        message: object = None
        if isinstance(data, dict):
            error = data.get("error")
            message = error.get("message") if isinstance(error, dict) else error or data.get("message")
        if not isinstance(message, str):
            message = response.text
        text = " ".join(message.split())[:_MAX_DETAIL_CHARS]
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text

    def _rejected(self, response: httpx2.Response) -> EmbeddingError:
        status = response.status_code
        if status in (401, 403):
            fix = "check the api_key for this endpoint (and that it may use this model)"
        elif status == 404:
            fix = (
                "check that base_url is the API root (usually ending in /v1) and that the server "
                f"serves model {self.model!r}"
            )
        else:
            fix = f"check that model {self.model!r} exists and is an embedding model"
            if self._dimensions is not None:
                fix += f" that accepts dimensions={self._dimensions}"
        detail = self._detail(response) or "(no error message)"
        return EmbeddingError(
            f"the embeddings endpoint {self.url} rejected the request with HTTP {status}: {detail}. "
            f"Fix: {fix}"
        )
