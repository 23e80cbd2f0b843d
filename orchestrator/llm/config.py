"""Provider configuration as it appears under `llm.providers.<name>` in config/agents.yaml."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


def _check_base_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:11434/v1, got {value!r}")
    try:
        parts.port  # noqa: B018 -- accessing it validates the port range
    except ValueError as exc:
        raise ValueError(f"base_url has an invalid port: {value!r}") from exc
    return value


class AnthropicProviderConfig(BaseModel):
    """The Anthropic Messages API."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["anthropic"]
    model: str
    api_key: SecretStr | None = None
    base_url: str = "https://api.anthropic.com"
    max_tokens: int = Field(default=4096, gt=0)
    timeout_s: float = Field(default=120, gt=0)
    max_retries: int = Field(default=4, ge=0)
    anthropic_version: str = "2023-06-01"

    @field_validator("base_url")
    @classmethod
    def check_base_url(cls, value: str) -> str:
        return _check_base_url(value)


class OpenAICompatProviderConfig(BaseModel):
    """Any OpenAI-compatible chat completions endpoint (Ollama, vLLM, llama.cpp, OpenAI)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai_compat"]
    model: str
    base_url: str
    api_key: SecretStr | None = None
    max_tokens: int = Field(default=4096, gt=0)
    timeout_s: float = Field(default=120, gt=0)
    max_retries: int = Field(default=4, ge=0)
    temperature: float | None = None

    @field_validator("base_url")
    @classmethod
    def check_base_url(cls, value: str) -> str:
        return _check_base_url(value)


ProviderConfig = Annotated[AnthropicProviderConfig | OpenAICompatProviderConfig, Field(discriminator="kind")]
