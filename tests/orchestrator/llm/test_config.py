from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from orchestrator.llm import AnthropicProviderConfig, OpenAICompatProviderConfig, ProviderConfig
from tests.orchestrator.llm.support import API_KEY

ADAPTER: TypeAdapter[AnthropicProviderConfig | OpenAICompatProviderConfig] = TypeAdapter(ProviderConfig)

LOCAL = {"kind": "openai_compat", "model": "qwen2.5:7b-instruct", "base_url": "http://127.0.0.1:11434/v1"}


def test_kind_selects_the_config_class_with_documented_defaults() -> None:
    claude = ADAPTER.validate_python({"kind": "anthropic", "model": "claude-sonnet"})
    local = ADAPTER.validate_python(LOCAL)

    assert isinstance(claude, AnthropicProviderConfig)
    assert claude.base_url == "https://api.anthropic.com"
    assert (claude.max_tokens, claude.timeout_s, claude.max_retries) == (4096, 120, 4)
    assert claude.anthropic_version == "2023-06-01"
    assert claude.api_key is None
    assert isinstance(local, OpenAICompatProviderConfig)
    assert (local.max_tokens, local.timeout_s, local.max_retries, local.temperature) == (4096, 120, 4, None)


@pytest.mark.parametrize(
    "data",
    [
        {**LOCAL, "kind": "ollama"},
        {key: value for key, value in LOCAL.items() if key != "kind"},
        {**LOCAL, "temprature": 0.1},
        {"kind": "anthropic", "model": "claude", "temperature": 0.1},
        {key: value for key, value in LOCAL.items() if key != "base_url"},
        {**LOCAL, "max_tokens": 0},
        {**LOCAL, "timeout_s": 0},
        {**LOCAL, "max_retries": -1},
        {"kind": "anthropic", "model": "claude", "max_tokens": -5},
        {**LOCAL, "base_url": "127.0.0.1:11434/v1"},
        {**LOCAL, "base_url": "ftp://127.0.0.1/v1"},
        {**LOCAL, "base_url": "http:///v1"},
        {**LOCAL, "base_url": "http://127.0.0.1:99999/v1"},
    ],
    ids=[
        "unknown-kind",
        "missing-kind",
        "unknown-key",
        "key-of-the-other-kind",
        "missing-base-url",
        "zero-max-tokens",
        "zero-timeout",
        "negative-retries",
        "negative-anthropic-max-tokens",
        "base-url-without-scheme",
        "base-url-not-http",
        "base-url-without-host",
        "base-url-bad-port",
    ],
)
def test_invalid_provider_configs_are_rejected(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ADAPTER.validate_python(data)


def test_base_url_error_shows_an_example() -> None:
    with pytest.raises(ValidationError, match=r"http://127\.0\.0\.1:11434/v1"):
        ADAPTER.validate_python({**LOCAL, "base_url": "localhost:11434"})


def test_api_key_is_hidden_in_repr_and_dumps() -> None:
    config = ADAPTER.validate_python({"kind": "anthropic", "model": "claude", "api_key": API_KEY})

    assert API_KEY not in repr(config)
    assert API_KEY not in str(config.model_dump())
    assert API_KEY not in config.model_dump_json()
    assert config.api_key is not None
    assert config.api_key.get_secret_value() == API_KEY
