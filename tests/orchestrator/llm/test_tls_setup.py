"""A provider's HTTP client is made on first use, its TLS context on a worker thread: ``warm()`` (a
daemon's start) makes it beside the servers' handshakes; a context that cannot be made is the
provider being unavailable, with the fix, never a crash. A provider reached over plain HTTP makes
no TLS context at all."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import orchestrator.llm.base
from orchestrator.llm import Provider, ProviderUnavailable, UserMessage
from shared.tls import default_context as shared_default_context
from tests.channel_servers.email.certificates import make_certificates
from tests.fakes.llm import FakeLLM, Reply
from tests.orchestrator.llm.support import VirtualTime, completion_response, openai
from tests.raw_http import read_request, serving

pytestmark = pytest.mark.anyio


class Contexts:
    """``default_context`` as the provider calls it: counted, with the thread it ran on; the context
    trusts the test's own CA."""

    def __init__(self, ca_file: Path, fail: bool = False) -> None:
        self.ca_file = ca_file
        self.threads: list[int] = []
        self.fail = fail

    def __call__(self, *args: Any, **kwargs: Any) -> ssl.SSLContext:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise FileNotFoundError(2, "No such file or directory", "/etc/missing-ca.pem")
        return ssl.create_default_context(cafile=str(self.ca_file))


@asynccontextmanager
async def https_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False
) -> AsyncIterator[tuple[Provider, Contexts]]:
    """An OpenAI-compatible provider at https://localhost, behind a certificate of the test's own CA."""
    certificates = make_certificates(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certificates.cert_file, certificates.key_file)
    contexts = Contexts(certificates.ca_file, fail)
    monkeypatch.setattr(orchestrator.llm.base, "default_context", contexts)

    async def api(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(completion_response("hello"))
            await writer.drain()

    async with serving(api, server_context) as server, FakeLLM(default=Reply("unused")) as fake:
        provider = openai(fake, VirtualTime(), base_url=f"https://localhost:{server.port}/v1")
        try:
            yield provider, contexts
        finally:
            await provider.aclose()


async def test_warm_makes_one_tls_context_on_a_worker_thread_and_requests_use_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with https_provider(tmp_path, monkeypatch) as (provider, contexts):
        async with anyio.create_task_group() as tg:
            tg.start_soon(provider.warm)
            tg.start_soon(provider.warm)  # two at once: one context
        completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
    assert completion.text == "hello"
    assert len(contexts.threads) == 1
    assert contexts.threads[0] != threading.get_ident()


async def test_a_first_request_without_warm_makes_the_client_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with https_provider(tmp_path, monkeypatch) as (provider, contexts):
        first = await provider.complete(system="s", messages=[UserMessage(content="a")], tools=[])
        second = await provider.complete(system="s", messages=[UserMessage(content="b")], tools=[])
    assert (first.text, second.text, len(contexts.threads)) == ("hello", "hello", 1)


async def test_a_provider_over_plain_http_makes_no_tls_context(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    contexts = Contexts(tmp_path / "unused.pem")
    monkeypatch.setattr(orchestrator.llm.base, "default_context", contexts)
    async with FakeLLM(default=Reply("hello")) as fake:
        provider = openai(fake, VirtualTime())
        try:
            await provider.warm()
            completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
        finally:
            await provider.aclose()
    assert (completion.text, contexts.threads) == ("hello", [])


async def test_a_tls_context_that_cannot_be_made_is_logged_then_unavailable_until_it_can(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    async with https_provider(tmp_path, monkeypatch, fail=True) as (provider, contexts):
        await provider.warm()  # logged, not raised: a daemon's start goes on
        with pytest.raises(ProviderUnavailable, match="SSL_CERT_FILE") as refused:
            await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
        contexts.fail = False
        completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
    assert (
        "its HTTPS client cannot be set up ([Errno 2] No such file or directory: '/etc/missing-ca.pem')"
        in str(refused.value)
    )
    assert "the first request tries again" in caplog.text
    assert "local" in caplog.text
    assert (completion.text, len(contexts.threads)) == ("hello", 3)


async def test_the_default_context_trusts_ssl_cert_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The real default context, not a stand-in: the provider verifies the server with the CA that
    # SSL_CERT_FILE names (tests/shared/test_http1.py: a server no trusted CA signed is refused).
    async with https_provider(tmp_path, monkeypatch) as (provider, contexts):
        monkeypatch.setattr(orchestrator.llm.base, "default_context", shared_default_context)
        monkeypatch.setenv("SSL_CERT_FILE", str(contexts.ca_file))
        completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
    assert completion.text == "hello"
