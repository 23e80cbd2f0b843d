"""Helpers shared by the provider tests."""

from __future__ import annotations

import json
import socket
from typing import Any

from orchestrator.llm import (
    AnthropicProviderConfig,
    OpenAICompatProviderConfig,
    Provider,
    build_provider,
)
from tests.fakes.llm import FakeLLM

API_KEY = "sk-test-very-secret-0123456789"


class VirtualTime:
    """A sleep that only records, and a clock that advances by what was slept."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.now = 1000.0

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.now += delay

    def clock(self) -> float:
        return self.now


def anthropic(fake: FakeLLM, time: VirtualTime, name: str = "claude", **overrides: Any) -> Provider:
    fields: dict[str, Any] = {
        "kind": "anthropic",
        "model": "claude-test",
        "base_url": fake.anthropic_base_url,
    }
    fields.update(overrides)
    return build_provider(
        name, AnthropicProviderConfig.model_validate(fields), sleep=time.sleep, clock=time.clock
    )


def openai(fake: FakeLLM, time: VirtualTime, name: str = "local", **overrides: Any) -> Provider:
    fields: dict[str, Any] = {"kind": "openai_compat", "model": "qwen-test", "base_url": fake.openai_base_url}
    fields.update(overrides)
    return build_provider(
        name, OpenAICompatProviderConfig.model_validate(fields), sleep=time.sleep, clock=time.clock
    )


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def completion_response(text: str) -> bytes:
    """A whole HTTP/1.1 response of an OpenAI-compatible API answering ``text``."""
    body = json.dumps(
        {
            "id": "c-1",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    return head + body
