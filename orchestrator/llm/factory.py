"""Build a provider from its configuration."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import httpx2

from orchestrator.llm.config import AnthropicProviderConfig, ProviderConfig
from orchestrator.llm.types import Provider


def build_provider(
    name: str,
    config: ProviderConfig,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Provider:
    """The provider configured under `llm.providers.<name>`; `sleep` and `clock` exist for tests."""
    # Only the configured provider's client is imported, when it is built.
    if isinstance(config, AnthropicProviderConfig):
        from orchestrator.llm.anthropic import AnthropicProvider

        return AnthropicProvider(name, config, transport=transport, sleep=sleep, clock=clock)
    from orchestrator.llm.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(name, config, transport=transport, sleep=sleep, clock=clock)
