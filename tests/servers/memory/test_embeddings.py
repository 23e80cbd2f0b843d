import json
import socket
import subprocess
import sys
import threading
import zlib
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pydantic
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from servers.memory import embedding_local
from servers.memory.embedding_local import MODEL_ID, LocalEmbedder, _default_model_path
from servers.memory.embedding_remote import OpenAICompatEmbedder, retry_after_seconds
from servers.memory.embeddings import EmbeddingError, EmbeddingSettings, build_embedder

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-0123456789"
FAKE_DIM = 8


# --- a real HTTP server speaking the OpenAI embeddings wire format ------------------------------------


@dataclass(frozen=True)
class Answer:
    """One scripted reply; by default deterministic vectors for the request's inputs."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    dim: int = FAKE_DIM


def fake_vector(text: str, dim: int) -> list[float]:
    """Not unit length, so the client's normalisation shows."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return [float(x) for x in 3.0 * rng.standard_normal(dim)]


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


class FakeEmbeddings:
    """POST /v1/embeddings on 127.0.0.1, answering from a script; records every request."""

    def __init__(self) -> None:
        self.script: deque[Answer] = deque()
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", loop="asyncio", http="h11", ws="none"
        )
        self._ready = threading.Event()
        self._server = _Uvicorn(config, self._ready)
        self._thread = threading.Thread(target=self._server.run, args=([self._socket],), daemon=True)

    def __enter__(self) -> "FakeEmbeddings":
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("the fake embeddings server did not start within 10 s")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()

    async def _embeddings(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append((dict(request.headers), body))
        answer = self.script.popleft() if self.script else Answer()
        if answer.raw is not None:
            return Response(answer.raw, status_code=answer.status, headers=answer.headers)
        if answer.body is not None:
            return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)
        dim = body.get("dimensions", answer.dim)
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text, dim)}
            for i, text in enumerate(body["input"])
        ]
        # Out of order on purpose: clients must sort by index.
        usage = {"prompt_tokens": 3, "total_tokens": 3}
        return JSONResponse(
            {"object": "list", "data": data[::-1], "model": body["model"], "usage": usage},
            status_code=answer.status,
            headers=answer.headers,
        )


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as server:
        yield server


@pytest.fixture
def fake(fake_server: FakeEmbeddings) -> Iterator[FakeEmbeddings]:
    fake_server.script.clear()
    fake_server.requests.clear()
    yield fake_server
    assert not fake_server.script, "scripted answers were left unused"


@dataclass
class Sleeps:
    """Records the delays the client asked for, without waiting."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def remote(fake: FakeEmbeddings, sleeps: Sleeps) -> AsyncIterator[OpenAICompatEmbedder]:
    embedder = OpenAICompatEmbedder(
        base_url=fake.base_url + "/",
        model="nomic-embed-text",
        api_key=API_KEY,
        max_retries=2,
        sleep=sleeps,
        jitter=lambda: 1.0,
        batch_size=2,
    )
    yield embedder
    await embedder.aclose()


# --- the local model ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    embedder = LocalEmbedder(batch_size=4)
    anyio.run(embedder.start)
    yield embedder
    anyio.run(embedder.aclose)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


async def test_similar_sentences_score_higher_than_unrelated_ones(local: LocalEmbedder) -> None:
    cat, kitten, revenue, weather = await local.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly revenue grew by ten percent.",
            "Tomorrow will be rainy and cold.",
        ]
    )
    assert cosine(cat, kitten) > 0.5
    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.3
    assert cosine(cat, kitten) > cosine(kitten, weather) + 0.3


async def test_local_vectors_are_384_float32_unit_rows(local: LocalEmbedder) -> None:
    vectors = await local.embed(["Ana prefers green tea", "", "x" * 5000])
    assert (local.model_id, local.dim) == ("all-MiniLM-L6-v2-onnx-int8", 384)
    assert (vectors.shape, vectors.dtype) == ((3, 384), np.dtype(np.float32))
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)


async def test_a_batch_gives_the_same_vectors_as_one_text_at_a_time(local: LocalEmbedder) -> None:
    texts = [
        "short",
        "a somewhat longer sentence about the weather in Madrid",
        "Ana's daughter starts school in September and needs new shoes",
        "ok",
        "The deploy failed because the migration timed out on the orders table",
        "tea",
    ]
    together = await local.embed(texts)
    alone = np.concatenate([await local.embed([text]) for text in texts])
    # Each text is a run of its own (its activations quantised over that run alone): to the bit.
    assert np.array_equal(together, alone)


async def test_a_question_is_tokenized_without_a_hand_off_and_a_long_import_on_a_worker_thread(
    local: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    await local.load()
    handed_off: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
        handed_off.append(function)
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    question = await local.tokenize(["when is Ana's birthday"])
    assert (len(question), handed_off) == (1, [])
    texts = ["Ana was born on 14 March 1990 in Lisbon."] * 60  # past INLINE_TOKENIZE_CHARS
    assert sum(map(len, texts)) > embedding_local.INLINE_TOKENIZE_CHARS
    assert len(await local.tokenize(texts)) == 60
    assert len(handed_off) == 1
    # Either way the same tokens.
    assert [e.ids for e in question] == [
        e.ids for e in await local.tokenize(["when is Ana's birthday"] * 100)
    ][:1]


async def test_batches_run_on_as_many_threads_at_once_as_the_embedder_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    both_running = threading.Barrier(2, timeout=10)  # broken if the two never run at once
    running: list[int] = []
    most: list[int] = [0]
    lock = threading.Lock()
    run_each_text = embedding_local.run_each_text

    def counted(session: Any, batch: Any, *, wait: bool) -> Any:
        with lock:
            running.append(1)
            most[0] = max(most[0], len(running))
        try:
            if wait:
                both_running.wait()
            return run_each_text(session, batch)
        finally:
            with lock:
                running.pop()

    texts = ["one", "two", "three", "four"]
    alone = await LocalEmbedder(batch_size=1, threads=1).embed(texts)
    for threads, wait in ((2, True), (1, False)):
        most[0] = 0
        monkeypatch.setattr(embedding_local, "run_each_text", partial(counted, wait=wait))
        embedder = LocalEmbedder(batch_size=1, threads=threads)
        assert np.array_equal(await embedder.embed(texts), alone)
        assert most[0] == threads


async def test_a_failed_run_is_raised_as_itself_and_no_run_starts_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[list[int]] = []

    def failing(session: Any, batch: Any) -> Any:
        started.append(batch.rows)
        raise RuntimeError("bad_alloc")

    monkeypatch.setattr(embedding_local, "run_each_text", failing)
    with pytest.raises(RuntimeError, match=r"^bad_alloc$"):
        await LocalEmbedder(batch_size=1, threads=1).embed(["a", "bb", "ccc"])
    assert started == [[0]]


async def test_text_past_256_tokens_is_truncated(local: LocalEmbedder) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    first, longer = await local.embed([words, words + " and a different ending about volcanoes"])
    assert np.abs(first - longer).max() < 1e-6


async def test_no_texts_give_an_empty_matrix(local: LocalEmbedder) -> None:
    empty = await local.embed([])
    assert (empty.shape, empty.dtype) == ((0, 384), np.dtype(np.float32))


async def test_a_bare_string_or_a_non_string_is_refused(local: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match=r"wrap a single text in a list: embed\(\[text\]\)$"):
        await local.embed("hello")
    with pytest.raises(TypeError, match=r"^texts\[1\] is int, expected str$"):
        await local.embed(["hello", 3])  # type: ignore[list-item]


async def test_the_model_loads_on_first_use_and_again_after_aclose() -> None:
    embedder = LocalEmbedder(threads=1)
    first = await embedder.embed(["hello"])
    await embedder.aclose()
    assert np.array_equal(await embedder.embed(["hello"]), first)
    assert repr(embedder) == "<LocalEmbedder all-MiniLM-L6-v2-onnx-int8 dim=384 threads=1>"


def test_local_embedder_refuses_bad_sizes() -> None:
    with pytest.raises(ValueError, match=r"^batch_size=0 must be >= 1 and max_tokens=256 >= 2$"):
        LocalEmbedder(batch_size=0)


# --- the OpenAI-compatible endpoint ---------------------------------------------------------------


def unit(values: list[float]) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


async def test_remote_vectors_come_back_in_input_order_and_unit_length(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings
) -> None:
    texts = ["alpha", "beta", "gamma"]
    vectors = await remote.embed(texts)
    expected = np.stack([unit(fake_vector(text, FAKE_DIM)) for text in texts])
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, expected, atol=1e-6)
    # batch_size=2: two requests, each with the model, the bearer key and no "dimensions".
    assert [body for _, body in fake.requests] == [
        {"model": "nomic-embed-text", "input": ["alpha", "beta"]},
        {"model": "nomic-embed-text", "input": ["gamma"]},
    ]
    assert {headers["authorization"] for headers, _ in fake.requests} == {f"Bearer {API_KEY}"}
    assert remote.dim == FAKE_DIM


async def test_start_probes_the_dimension(remote: OpenAICompatEmbedder, fake: FakeEmbeddings) -> None:
    with pytest.raises(EmbeddingError) as caught:
        _ = remote.dim
    assert str(caught.value) == (
        f"the vector size of openai_compat:nomic-embed-text at {fake.base_url}/embeddings is not known yet. "
        "Fix: await start() first (it asks the endpoint), or set dimensions"
    )
    await remote.start()
    assert (remote.dim, remote.model_id) == (FAKE_DIM, "openai_compat:nomic-embed-text")
    assert [body["input"] for _, body in fake.requests] == [["dimension probe"]]
    empty = await remote.embed([])
    assert empty.shape == (0, FAKE_DIM)


async def test_configured_dimensions_are_sent_and_known_before_start(fake: FakeEmbeddings) -> None:
    embedder = build_embedder(
        EmbeddingSettings(provider="openai_compat", base_url=fake.base_url, model="m", dimensions=4)
    )
    try:
        assert embedder.dim == 4
        vectors = await embedder.embed(["one"])
    finally:
        await embedder.aclose()
    assert vectors.shape == (1, 4)
    assert [body for _, body in fake.requests] == [{"model": "m", "input": ["one"], "dimensions": 4}]
    assert "authorization" not in fake.requests[0][0]


async def test_a_rate_limit_is_retried_after_the_servers_retry_after(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings, sleeps: Sleeps
) -> None:
    fake.script.extend([Answer(429, {"error": {"message": "slow down"}}, headers={"retry-after": "7"})])
    vectors = await remote.embed(["alpha"])
    assert np.allclose(vectors[0], unit(fake_vector("alpha", FAKE_DIM)), atol=1e-6)
    assert sleeps.delays == [7.0]
    assert len(fake.requests) == 2


async def test_server_errors_are_retried_with_backoff_then_reported(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings, sleeps: Sleeps
) -> None:
    failure = Answer(503, {"error": {"message": f"overloaded (key {API_KEY})"}})
    fake.script.extend([failure, failure, failure])
    with pytest.raises(EmbeddingError) as caught:
        await remote.embed(["alpha"])
    assert str(caught.value) == (
        f"the embeddings endpoint {fake.base_url}/embeddings failed 3 time(s); last error: HTTP 503: "
        "overloaded (key [redacted]). Fix: check the embedding server is running and reachable at base_url, "
        "or raise max_retries / timeout_s if it is only slow or rate-limited"
    )
    assert sleeps.delays == [0.5, 1.0]


async def test_an_unreachable_endpoint_is_retried_then_reported(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAICompatEmbedder(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, sleep=sleeps, jitter=lambda: 0.5
    )
    with pytest.raises(EmbeddingError, match=r"failed 2 time\(s\); last error: ConnectError"):
        await embedder.start()
    await embedder.aclose()
    assert sleeps.delays == [0.25]


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        (401, "check the api_key for this endpoint (and that it may use this model)"),
        (
            404,
            "check that base_url is the API root (usually ending in /v1) and that the server serves model "
            "'nomic-embed-text'",
        ),
        (400, "check that model 'nomic-embed-text' exists and is an embedding model"),
    ],
)
async def test_a_rejected_request_is_not_retried_and_names_the_fix(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings, sleeps: Sleeps, status: int, fix: str
) -> None:
    fake.script.append(Answer(status, {"error": {"message": "nope"}}))
    with pytest.raises(EmbeddingError) as caught:
        await remote.embed(["alpha"])
    assert str(caught.value) == (
        f"the embeddings endpoint {fake.base_url}/embeddings rejected the request with HTTP {status}: nope. "
        f"Fix: {fix}"
    )
    assert sleeps.delays == []


async def test_a_rejected_size_names_the_dimensions(fake: FakeEmbeddings) -> None:
    fake.script.append(Answer(400, raw=b"dimensions not supported", headers={"content-type": "text/plain"}))
    embedder = OpenAICompatEmbedder(base_url=fake.base_url, model="m", dimensions=64)
    with pytest.raises(
        EmbeddingError, match=r"HTTP 400: dimensions not supported\. Fix: .* accepts dimensions=64$"
    ):
        await embedder.embed(["a"])
    await embedder.aclose()


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (Answer(raw=b"<html>proxy</html>"), "Expecting value: line 1 column 1 (char 0)"),
        (Answer(body={"result": []}), 'the body should be an object with a "data" array'),
        (Answer(body={"data": []}), "data has 0 item(s) for 1 input(s)"),
        (
            Answer(body={"data": [{"index": 1, "embedding": [1.0]}]}),
            "data[0].index should be an integer from 0 to 0",
        ),
        (
            Answer(body={"data": [{"index": 0, "embedding": "AAAA"}]}),
            "data[0].embedding should be a non-empty array of numbers",
        ),
        (
            Answer(body={"data": [{"index": 0, "embedding": [[1.0]]}]}),
            "each embedding should be a flat array of numbers",
        ),
        (
            Answer(body={"data": [{"index": 0, "embedding": [{"x": 1}, 1.0]}]}),
            "float() argument must be a string or a real number, not 'dict'",
        ),
        (
            Answer(body={"data": [{"index": 0, "embedding": ["x", 1.0]}]}),
            "could not convert string to float: 'x'",
        ),
    ],
)
async def test_a_body_in_another_format_is_reported(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings, answer: Answer, problem: str
) -> None:
    fake.script.append(answer)
    with pytest.raises(EmbeddingError) as caught:
        await remote.embed(["alpha"])
    assert str(caught.value) == (
        f"the embeddings endpoint {fake.base_url}/embeddings answered HTTP 200 with a body that is not the "
        f"OpenAI embeddings format: {problem}. Fix: check that base_url points at an OpenAI-compatible API "
        "root (usually ending in /v1)"
    )


async def test_repeated_indexes_and_ragged_rows_are_reported(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings
) -> None:
    twice = {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}
    ragged = {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}
    fake.script.extend([Answer(body=twice), Answer(body=ragged)])
    with pytest.raises(EmbeddingError, match=r"data\[1\]\.index 0 repeats"):
        await remote.embed(["a", "b"])
    with pytest.raises(EmbeddingError, match="inhomogeneous"):
        await remote.embed(["a", "b"])


async def test_a_change_of_dimension_or_a_zero_vector_is_reported(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings
) -> None:
    await remote.start()
    fake.script.extend([Answer(dim=16), Answer(body={"data": [{"index": 0, "embedding": [0.0, 0.0]}]})])
    with pytest.raises(EmbeddingError) as caught:
        await remote.embed(["a"])
    assert str(caught.value) == (
        f"the embeddings endpoint {fake.base_url}/embeddings returned 16-dimensional vectors for model "
        "'nomic-embed-text', expected 8. Fix: set dimensions to what the model returns, or choose a model "
        "that honours it"
    )
    fresh = OpenAICompatEmbedder(base_url=fake.base_url, model="m")
    with pytest.raises(EmbeddingError, match=r"returned a zero or non-finite vector for input 0"):
        await fresh.embed(["a"])
    await fresh.aclose()


async def test_an_undecodable_reply_is_reported_without_retrying(
    remote: OpenAICompatEmbedder, fake: FakeEmbeddings, sleeps: Sleeps
) -> None:
    fake.script.append(Answer(raw=b"not gzip at all", headers={"content-encoding": "gzip"}))
    with pytest.raises(EmbeddingError, match=r"sent a reply that cannot be read \(DecodingError: "):
        await remote.embed(["alpha"])
    assert sleeps.delays == []


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("2.5", now) == 2.5
    assert retry_after_seconds("Sat, 21 Nov 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("3600", now) == 60.0  # capped
    assert retry_after_seconds("-4", now) == 0.0
    assert [retry_after_seconds(value, now) for value in (None, "soon", "nan")] == [None, None, None]


def test_remote_embedder_refuses_bad_sizes() -> None:
    with pytest.raises(ValueError, match=r"^batch_size=0 must be >= 1 and max_retries=-1 >= 0$"):
        OpenAICompatEmbedder(base_url="http://x/v1", model="m", batch_size=0, max_retries=-1)


# --- settings and the factory ---------------------------------------------------------------------


def test_default_settings_build_the_local_model_without_loading_it() -> None:
    embedder = build_embedder(EmbeddingSettings())
    assert isinstance(embedder, LocalEmbedder)
    # Turns of 8 texts per thread locally (a remote request carries 32 by default).
    assert (embedder.model_id, embedder.dim, embedder.batch_size) == (MODEL_ID, 384, 8)
    configured = build_embedder(EmbeddingSettings(batch_size=16))
    assert isinstance(configured, LocalEmbedder)
    assert configured.batch_size == 16


async def test_a_remote_provider_sends_32_texts_a_request_unless_told_otherwise() -> None:
    embedder = build_embedder(
        EmbeddingSettings(provider="openai_compat", base_url="http://127.0.0.1:11434/v1/", model="m")
    )
    assert isinstance(embedder, OpenAICompatEmbedder)
    assert embedder.batch_size == 32
    await embedder.aclose()


async def test_openai_compat_settings_build_the_remote_client() -> None:
    settings = EmbeddingSettings(
        provider="openai_compat",
        base_url="http://127.0.0.1:11434/v1/",
        model="nomic-embed-text",
        api_key=pydantic.SecretStr(API_KEY),
        batch_size=8,
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, OpenAICompatEmbedder)
    assert (embedder.url, embedder.model_id, embedder.batch_size) == (
        "http://127.0.0.1:11434/v1/embeddings",
        "openai_compat:nomic-embed-text",
        8,
    )
    assert API_KEY not in repr(embedder) + repr(settings)
    await embedder.aclose()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"provider": "openai_compat", "model": "m"},
            "provider 'openai_compat' needs base_url (the API root, e.g. http://127.0.0.1:11434/v1) and "
            "model (e.g. nomic-embed-text)",
        ),
        (
            {"provider": "openai_compat", "model": "m", "base_url": "localhost:11434"},
            "base_url must be an http(s) URL such as http://127.0.0.1:11434/v1, got 'localhost:11434'",
        ),
        (
            {"model": "m", "dimensions": 8},
            "model, dimensions apply only to provider 'openai_compat' (the local model takes none): remove "
            "them, or set provider: openai_compat",
        ),
    ],
)
def test_settings_that_do_not_fit_the_provider_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        EmbeddingSettings(**fields)
    assert caught.value.errors()[0]["msg"] == f"Value error, {message}"


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        EmbeddingSettings(provider="local", model_name="x")  # type: ignore[call-arg]


async def test_an_idle_local_model_is_freed_and_loads_again_on_the_next_embedding() -> None:
    embedder = LocalEmbedder(threads=1)
    assert not await embedder.release_if_idle(0.0)  # nothing loaded yet
    before = await embedder.embed(["the garden needs water"])
    assert not await embedder.release_if_idle(3600.0)  # used just now
    assert await embedder.release_if_idle(0.0)
    assert not await embedder.release_if_idle(0.0)
    after = await embedder.embed(["the garden needs water"])
    assert np.allclose(before, after, atol=1e-6)
    await embedder.aclose()


# Measured in a process of its own: a test worker's heap also holds what other tests and their threads
# allocated and freed, which comes and goes with them and is not the embedder's. The process bounds
# its heap as the memory server does when it opens (servers.memory.heap.keep_the_heap_small): with
# glibc's own settings, what a trimmed batch left behind moved with the machine's load (4 to 11 MB
# on a loaded 2-core machine), close to what an untrimmed one keeps.
_BATCH_PROBE = """
import anyio, json
from pathlib import Path
from servers.memory.embedding_local import LocalEmbedder
from servers.memory.heap import keep_the_heap_small

def private_mb():
    kb = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            kb[key] = int(rest.split()[0])
    return (kb["Private_Clean"] + kb["Private_Dirty"]) / 1024

async def main():
    keep_the_heap_small()
    embedder = LocalEmbedder(threads=2)
    await embedder.embed(["warm up"])
    loaded = private_mb()
    await embedder.embed(
        [f"memory {n}: " + "the shopping list for the trip to the mountains " * 8 for n in range(32)]
    )
    after = private_mb()
    await embedder.aclose()
    print(json.dumps({"loaded": loaded, "after": after}))

anyio.run(main)
"""


def test_a_batch_of_texts_gives_its_working_memory_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BATCH_PROBE],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    # With the trim a batch of 32 texts of ~80 tokens leaves 1-4 MB behind (busy machine or not);
    # without it, what the batch freed stays in the process: 11-21 MB, from half the int8 model file
    # to its size.
    assert measured["after"] - measured["loaded"] < _default_model_path().stat().st_size / 2**20 / 3, measured
