"""Errors raised by LLM providers; each message names the provider and what to do next."""

from __future__ import annotations


class LLMError(Exception):
    """Base class for every provider failure."""

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider


class ProviderUnavailable(LLMError):
    """The provider could not be reached, or kept failing transiently, after all retries."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        base_url: str = "",
        attempts: int = 0,
        reason: str = "",
    ) -> None:
        super().__init__(message, provider=provider)
        self.base_url = base_url
        self.attempts = attempts
        self.reason = reason


class ProviderRejected(LLMError):
    """The provider answered with a non-retryable error status (bad request, auth, unknown model)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int = 0,
        provider_message: str = "",
    ) -> None:
        super().__init__(message, provider=provider)
        self.status = status
        self.provider_message = provider_message


class ProviderResponseError(LLMError):
    """The provider answered 2xx with a body that is not the expected wire format."""


def unavailable_hint(name: str, kind: str, base_url: str) -> str:
    """What an operator can do when a provider cannot be reached."""
    if kind == "anthropic":
        return (
            f"Check network access to {base_url} and that the service is up, "
            f"or set llm.providers.{name}.base_url in config/agents.yaml, "
            "or pick another provider with NEXO_MODEL_PROVIDER."
        )
    return (
        f"Start the model server (e.g. Ollama) at {base_url} "
        f"or set llm.providers.{name}.base_url in config/agents.yaml, "
        "or set ANTHROPIC_API_KEY and NEXO_MODEL_PROVIDER=claude to use Anthropic instead."
    )


def rejected_hint(name: str, kind: str, status: int, model: str) -> str:
    """What an operator can do about a non-retryable error status."""
    if status in (401, 403):
        env = " (or ANTHROPIC_API_KEY)" if kind == "anthropic" else ""
        return f"Check llm.providers.{name}.api_key{env}: the provider refused the credentials."
    if status == 404:
        return (
            f"Check that model '{model}' exists on the provider and that "
            f"llm.providers.{name}.base_url points at the API root."
        )
    return f"Check llm.providers.{name} (model, max_tokens) and the tool schemas sent with the request."
