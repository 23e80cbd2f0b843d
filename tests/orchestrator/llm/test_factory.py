from __future__ import annotations

import json
from contextlib import aclosing

import httpx2
import pytest

from orchestrator.llm import (
    AnthropicProvider,
    AnthropicProviderConfig,
    OpenAICompatProvider,
    OpenAICompatProviderConfig,
    UserMessage,
    build_provider,
)
from tests.fakes.llm import FakeLLM, Reply
from tests.orchestrator.llm.support import API_KEY, VirtualTime, anthropic, openai

pytestmark = pytest.mark.anyio


async def test_build_provider_picks_the_class_for_the_kind() -> None:
    local_config = OpenAICompatProviderConfig(
        kind="openai_compat", model="qwen", base_url="http://127.0.0.1:11434/v1"
    )
    async with (
        aclosing(
            build_provider("claude", AnthropicProviderConfig(kind="anthropic", model="claude-sonnet"))
        ) as claude,
        aclosing(build_provider("local", local_config)) as local,
    ):
        assert isinstance(claude, AnthropicProvider)
        assert isinstance(local, OpenAICompatProvider)
        assert claude.name == "claude"
        assert local.name == "local"


async def test_describe_and_repr_name_kind_model_and_url_but_never_the_key(
    fake: FakeLLM, vtime: VirtualTime
) -> None:
    async with (
        aclosing(openai(fake, vtime, api_key=API_KEY)) as local,
        aclosing(anthropic(fake, vtime, api_key=API_KEY)) as claude,
    ):
        assert local.describe() == f"openai_compat 'local' (model qwen-test at {fake.openai_base_url})"
        assert claude.describe() == f"anthropic 'claude' (model claude-test at {fake.anthropic_base_url})"
        for provider in (local, claude):
            assert API_KEY not in provider.describe()
            assert API_KEY not in repr(provider)
            assert provider.describe() in repr(provider)


async def test_an_injected_transport_carries_the_requests() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        reply = {"choices": [{"message": {"content": "via transport"}, "finish_reason": "stop"}]}
        return httpx2.Response(200, content=json.dumps(reply).encode())

    config = OpenAICompatProviderConfig(kind="openai_compat", model="m", base_url="http://models.invalid/v1")
    async with aclosing(build_provider("local", config, transport=httpx2.MockTransport(handler))) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert completion.text == "via transport"
    assert seen == ["http://models.invalid/v1/chat/completions"]


async def test_default_sleep_and_clock_measure_real_elapsed_time(fake: FakeLLM) -> None:
    fake.push(Reply("hi"))
    config = OpenAICompatProviderConfig(kind="openai_compat", model="m", base_url=fake.openai_base_url)
    async with aclosing(build_provider("local", config)) as provider:
        completion = await provider.complete(system="", messages=[UserMessage("hi")], tools=[])

    assert 0.0 < completion.elapsed_s < 10.0
