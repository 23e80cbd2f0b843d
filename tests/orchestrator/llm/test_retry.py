from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from orchestrator.llm import (
    Provider,
    ProviderRejected,
    ProviderResponseError,
    ProviderUnavailable,
    UserMessage,
)
from orchestrator.llm.retry import backoff_delay, is_retryable_status, parse_retry_after
from tests.fakes.llm import Fail, FakeLLM, Raw, RecordedRequest, Reply
from tests.orchestrator.llm.support import API_KEY, VirtualTime, anthropic, closed_port, openai

pytestmark = pytest.mark.anyio

MakeProvider = Callable[..., Provider]
BOTH_WIRES = pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])


async def ask(provider: Provider) -> str | None:
    completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])
    return completion.text


@BOTH_WIRES
async def test_429_retry_after_seconds_is_honoured_and_counted_in_elapsed(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider
) -> None:
    fake.push(Fail(429, retry_after="7"), Reply("finally"))
    async with aclosing(make(fake, vtime)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert completion.text == "finally"
    assert vtime.delays == [7.0]
    assert completion.elapsed_s == 7.0
    assert len(fake.requests) == 2


@BOTH_WIRES
async def test_retry_after_http_date_is_honoured_and_capped_at_a_minute(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider
) -> None:
    far = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    fake.push(Fail(503, retry_after=far), Fail(429, retry_after=past), Reply("ok"))
    async with aclosing(make(fake, vtime)) as provider:
        assert await ask(provider) == "ok"

    assert vtime.delays == [60.0, 0.0]


@BOTH_WIRES
async def test_server_errors_are_retried_with_jittered_backoff_then_succeed(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake.push(Fail(500), Fail(503, retry_after="soon"), Fail(529), Fail(408), Reply("recovered"))
    async with aclosing(make(fake, vtime, api_key=API_KEY)) as provider:
        assert await ask(provider) == "recovered"

    assert len(vtime.delays) == 4
    for attempt, delay in enumerate(vtime.delays):
        assert 0.0 <= delay <= 0.5 * 2**attempt
    retries = [record for record in caplog.records if record.name == "nexo.llm"]
    assert [record.levelno for record in retries] == [logging.WARNING] * 4
    first = retries[0].getMessage()
    assert provider.name in first
    assert "attempt 1/5" in first
    assert "HTTP 500" in first
    assert "HTTP 529" in retries[2].getMessage()
    assert API_KEY not in caplog.text
    assert "scripted failure" not in caplog.text


@BOTH_WIRES
async def test_exhausted_retries_raise_provider_unavailable_naming_provider_and_base_url(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider
) -> None:
    fake.push(*[Fail(503, message=f"overloaded with {API_KEY}")] * 3)
    async with aclosing(make(fake, vtime, name="primary", max_retries=2, api_key=API_KEY)) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await ask(provider)

    error = caught.value
    message = str(error)
    assert len(fake.requests) == 3
    assert len(vtime.delays) == 2
    assert error.provider == "primary"
    assert error.attempts == 3
    assert error.base_url in message
    assert "'primary'" in message
    assert "after 3 attempt(s)" in message
    assert "HTTP 503: overloaded with [redacted]" in message
    assert "llm.providers.primary.base_url" in message
    assert API_KEY not in message


async def test_openai_compat_unavailable_message_suggests_starting_the_server_or_using_anthropic(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Fail(500))
    async with aclosing(openai(fake, vtime, max_retries=0)) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await ask(provider)

    assert "Start the model server" in str(caught.value)
    assert "ANTHROPIC_API_KEY and NEXO_MODEL_PROVIDER=claude" in str(caught.value)
    assert vtime.delays == []


@BOTH_WIRES
async def test_connection_refused_raises_provider_unavailable_after_retries(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider
) -> None:
    port = closed_port()
    base_url = f"http://127.0.0.1:{port}" + ("/v1" if make is openai else "")
    async with aclosing(make(fake, vtime, base_url=base_url, max_retries=1)) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await ask(provider)

    assert len(vtime.delays) == 1
    assert "ConnectError" in caught.value.reason
    assert base_url in str(caught.value)
    assert fake.requests == []


async def test_read_timeout_is_retried_then_reported_as_unavailable(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    release = threading.Event()

    def stall(request: RecordedRequest) -> Reply:
        release.wait(5)
        return Reply("too late")

    fake.push(stall, stall)
    try:
        async with aclosing(openai(fake, vtime, timeout_s=0.05, max_retries=1)) as provider:
            with pytest.raises(ProviderUnavailable) as caught:
                await ask(provider)
    finally:
        release.set()

    assert caught.value.reason.startswith("ReadTimeout")
    assert caught.value.attempts == 2


@BOTH_WIRES
async def test_401_is_not_retried_and_its_message_never_contains_the_key(
    fake: FakeLLM, vtime: VirtualTime, make: MakeProvider
) -> None:
    fake.push(Fail(401, message=f"invalid api key {API_KEY}"))
    async with aclosing(make(fake, vtime, api_key=API_KEY)) as provider:
        with pytest.raises(ProviderRejected) as caught:
            await ask(provider)

    error = caught.value
    assert error.status == 401
    assert error.provider_message == "invalid api key [redacted]"
    assert API_KEY not in str(error)
    assert API_KEY not in repr(error)
    assert f"llm.providers.{provider.name}.api_key" in str(error)
    assert vtime.delays == []
    assert len(fake.requests) == 1


async def test_anthropic_auth_failure_points_at_the_environment_variable(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    fake.push(Fail(403, message="forbidden"))
    async with aclosing(anthropic(fake, vtime)) as provider:
        with pytest.raises(ProviderRejected) as caught:
            await ask(provider)

    assert "ANTHROPIC_API_KEY" in str(caught.value)


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (404, "Check that model 'qwen-test' exists"),
        (400, "Check llm.providers.local (model, max_tokens)"),
        (422, "Check llm.providers.local (model, max_tokens)"),
        (302, "Check llm.providers.local"),
    ],
)
async def test_non_retryable_statuses_raise_provider_rejected_with_a_hint(
    fake: FakeLLM, vtime: VirtualTime, status: int, hint: str
) -> None:
    fake.push(Fail(status, message="nope"))
    async with aclosing(openai(fake, vtime)) as provider:
        with pytest.raises(ProviderRejected) as caught:
            await ask(provider)

    assert caught.value.status == status
    assert f"HTTP {status}: nope" in str(caught.value)
    assert hint in str(caught.value)
    assert vtime.delays == []


@pytest.mark.parametrize(
    ("reply", "provider_message"),
    [
        (Raw('{"error": "model \\"qwen\\" not found"}', status=404), 'model "qwen" not found'),
        (Raw('{"message": "bad input"}', status=400), "bad input"),
        (Raw("plain\n  text   error", status=400, media_type="text/plain"), "plain text error"),
        (Raw("", status=400), ""),
    ],
)
async def test_rejected_message_is_read_from_any_common_error_shape(
    fake: FakeLLM, vtime: VirtualTime, reply: Raw, provider_message: str
) -> None:
    fake.push(reply)
    async with aclosing(openai(fake, vtime)) as provider:
        with pytest.raises(ProviderRejected) as caught:
            await ask(provider)

    assert caught.value.provider_message == provider_message
    if not provider_message:
        assert "(no error message)" in str(caught.value)


async def test_undecodable_body_raises_provider_response_error(fake: FakeLLM, vtime: VirtualTime) -> None:
    fake.push(Raw(b"definitely not gzip", headers={"content-encoding": "gzip"}))
    async with aclosing(anthropic(fake, vtime)) as provider:
        with pytest.raises(ProviderResponseError, match="could not be decoded"):
            await ask(provider)


def test_retry_after_parsing() -> None:
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("3600") == 60.0
    assert parse_retry_after("Tue, 01 Jan 2030 12:00:30 GMT", now=lambda: now) == 30.0
    # An offset-less date ("-0000") is read as UTC.
    assert parse_retry_after("Tue, 01 Jan 2030 12:00:10 -0000", now=lambda: now) == 10.0


def test_backoff_is_exponential_full_jitter_capped_at_thirty_seconds() -> None:
    assert [backoff_delay(attempt, rand=lambda: 1.0) for attempt in range(8)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
    ]
    assert backoff_delay(1000, rand=lambda: 0.5) == 15.0
    assert backoff_delay(3, rand=lambda: 0.0) == 0.0
    assert 0.0 <= backoff_delay(2) <= 2.0


@pytest.mark.parametrize(
    ("status", "retryable"), [(408, True), (429, True), (500, True), (529, True), (599, True)]
)
def test_transient_statuses_are_retryable(status: int, retryable: bool) -> None:
    assert is_retryable_status(status) is retryable


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 422, 600])
def test_client_errors_are_not_retryable(status: int) -> None:
    assert not is_retryable_status(status)
