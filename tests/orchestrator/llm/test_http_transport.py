"""The model's HTTP client: nexo's own HTTP/1.1 transport (shared/http1.py), one kept connection for
a goal's calls, and httpx2's own transports when the environment names a proxy for the provider."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.llm import UserMessage
from tests.fakes.llm import FakeLLM, Reply
from tests.orchestrator.llm.support import VirtualTime, completion_response, openai
from tests.raw_http import read_request, serving

pytestmark = pytest.mark.anyio

PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


async def test_a_goals_calls_share_one_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    lines: list[bytes] = []

    async def provider_api(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _, _ = await read_request(reader)
            lines.append(line)
            writer.write(completion_response(f"answer {len(lines)}"))
            await writer.drain()

    async with serving(provider_api) as server, FakeLLM(default=Reply("unused")) as fake:
        provider = openai(fake, VirtualTime(), base_url=f"http://127.0.0.1:{server.port}/v1")
        try:
            texts = [
                (await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])).text
                for _ in range(3)
            ]
        finally:
            await provider.aclose()
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert lines == [b"POST /v1/chat/completions HTTP/1.1"] * 3
    assert server.connections == 1


async def test_a_proxy_named_by_the_environment_carries_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, _ = await read_request(reader)
        seen.append(line)
        writer.write(completion_response("via the proxy"))
        await writer.drain()

    async with serving(proxy) as server, FakeLLM(default=Reply("direct")) as fake:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
        monkeypatch.setenv("NO_PROXY", "")
        provider = openai(fake, VirtualTime())
        try:
            completion = await provider.complete(system="s", messages=[UserMessage(content="hi")], tools=[])
        finally:
            await provider.aclose()
    assert completion.text == "via the proxy"
    assert seen == [f"POST {fake.openai_base_url}/chat/completions HTTP/1.1".encode()]
