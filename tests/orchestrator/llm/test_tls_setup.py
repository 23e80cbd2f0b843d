"""A provider's HTTPS client is made on first use, its TLS context on a worker thread: ``warm()`` (a
daemon's start) makes it beside the servers' handshakes; a context that cannot be made is the
provider being unavailable, with the fix, never a crash."""

from __future__ import annotations

import ssl
import threading
from typing import Any

import anyio
import httpx2
import pytest

from orchestrator.llm import ProviderUnavailable, UserMessage
from tests.fakes.llm import FakeLLM, Reply
from tests.orchestrator.llm.support import VirtualTime, openai

pytestmark = pytest.mark.anyio


class Contexts:
    """``httpx2.create_ssl_context`` as the provider calls it: counted, with the thread it ran on."""

    def __init__(self, fail: bool = False) -> None:
        self.threads: list[int] = []
        self.fail = fail

    def __call__(self, *args: Any, **kwargs: Any) -> ssl.SSLContext:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise FileNotFoundError(2, "No such file or directory", "/etc/missing-ca.pem")
        return ssl.create_default_context()


async def test_warm_makes_one_tls_context_on_a_worker_thread_and_requests_use_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts = Contexts()
    monkeypatch.setattr(httpx2, "create_ssl_context", contexts)
    async with FakeLLM(default=Reply("hello")) as fake:
        provider = openai(fake, VirtualTime())
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(provider.warm)
                tg.start_soon(provider.warm)  # two at once: one context
            completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
        finally:
            await provider.aclose()
    assert completion.text == "hello"
    assert len(contexts.threads) == 1
    assert contexts.threads[0] != threading.get_ident()


async def test_a_first_request_without_warm_makes_the_client_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    contexts = Contexts()
    monkeypatch.setattr(httpx2, "create_ssl_context", contexts)
    async with FakeLLM(default=Reply("hello")) as fake:
        provider = openai(fake, VirtualTime())
        try:
            first = await provider.complete(system="s", messages=[UserMessage(content="a")], tools=[])
            second = await provider.complete(system="s", messages=[UserMessage(content="b")], tools=[])
        finally:
            await provider.aclose()
    assert (first.text, second.text, len(contexts.threads)) == ("hello", "hello", 1)


async def test_a_tls_context_that_cannot_be_made_is_logged_then_unavailable_until_it_can(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    contexts = Contexts(fail=True)
    monkeypatch.setattr(httpx2, "create_ssl_context", contexts)
    async with FakeLLM(default=Reply("hello")) as fake:
        provider = openai(fake, VirtualTime())
        try:
            await provider.warm()  # logged, not raised: a daemon's start goes on
            with pytest.raises(ProviderUnavailable, match="SSL_CERT_FILE") as refused:
                await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
            contexts.fail = False
            completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
        finally:
            await provider.aclose()
    assert (
        "its HTTPS client cannot be set up ([Errno 2] No such file or directory: '/etc/missing-ca.pem')"
        in str(refused.value)
    )
    assert "the first request tries again" in caplog.text
    assert "local" in caplog.text
    assert (completion.text, len(contexts.threads)) == ("hello", 3)
