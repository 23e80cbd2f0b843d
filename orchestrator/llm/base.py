"""Shared HTTP plumbing for providers: one client, retries, status mapping, body decoding."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx2
from pydantic_core import to_json

from orchestrator.llm.config import AnthropicProviderConfig, OpenAICompatProviderConfig
from orchestrator.llm.errors import (
    ProviderRejected,
    ProviderResponseError,
    ProviderUnavailable,
    rejected_hint,
)
from orchestrator.llm.retry import RetryTarget, send_with_retries
from orchestrator.llm.types import Completion, Message, ToolSpec
from shared.http1 import Http1Transport
from shared.http1_wire import proxied
from shared.tls import default_context

_MAX_ERROR_CHARS = 500

logger = logging.getLogger("nexo.llm")


class WireFormatError(ValueError):
    """A 2xx body that does not match the wire format; wrapped into ProviderResponseError."""


def expect_dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireFormatError(f"{where} should be an object, got {type(value).__name__}")
    return value


def expect_list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise WireFormatError(f"{where} should be an array, got {type(value).__name__}")
    return value


def expect_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise WireFormatError(f"{where} should be a string, got {type(value).__name__}")
    return value


def token_count(value: object, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireFormatError(f"{where} should be an integer, got {type(value).__name__}")
    return value


class HTTPProvider(ABC):
    """A provider that POSTs one JSON request per completion."""

    kind: ClassVar[str]
    wire_hint: ClassVar[str]

    def __init__(
        self,
        name: str,
        config: AnthropicProviderConfig | OpenAICompatProviderConfig,
        *,
        transport: httpx2.AsyncBaseTransport | None,
        sleep: Callable[[float], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self.model = config.model
        self.base_url = config.base_url.rstrip("/")
        self.max_tokens = config.max_tokens
        self.max_retries = config.max_retries
        self._api_key = config.api_key.get_secret_value() if config.api_key is not None else None
        self._sleep = sleep
        self._clock = clock
        self._target = RetryTarget(name=name, kind=self.kind, base_url=self.base_url, label=self.describe())
        self._timeout = config.timeout_s
        self._client = (
            None if transport is None else httpx2.AsyncClient(timeout=self._timeout, transport=transport)
        )
        self._making = anyio.Lock()

    def describe(self) -> str:
        return f"{self.kind} '{self.name}' (model {self.model} at {self.base_url})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def warm(self) -> None:
        """Make the HTTP client now, so the first request does not wait for it (a daemon starts
        this beside its servers' handshakes); a failure is logged and left to the first request."""
        try:
            await self._http()
        except ProviderUnavailable as exc:
            logger.warning("%s; the first request tries again", exc)

    async def _http(self) -> httpx2.AsyncClient:
        """The HTTP client, made on first use. Its TLS context (the CA bundle read and parsed, 30 to
        60 ms of a small machine's CPU) is made on a worker thread: OpenSSL reads it without the
        interpreter's lock, so the event loop goes on meanwhile. A provider reached over plain HTTP
        (a model on this machine or the local network), and not through a proxy, needs none."""
        if self._client is not None:
            return self._client  # every request after the first: no lock taken
        async with self._making:
            if self._client is None:
                via_proxy = proxied(self.base_url)
                context = None
                if via_proxy or urlsplit(self.base_url).scheme == "https":
                    try:
                        context = await anyio.to_thread.run_sync(default_context)
                    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                        raise ProviderUnavailable(
                            f"{self.describe()}: its HTTPS client cannot be set up ({exc}); check the "
                            "CA certificates (SSL_CERT_FILE or SSL_CERT_DIR, if set, must name readable "
                            "PEM files)",
                            provider=self.name,
                            base_url=self.base_url,
                            reason="tls",
                        ) from exc
                # nexo's own HTTP/1.1 transport (shared/http1.py): a millisecond less of CPU per
                # call than httpx2's pool. Through a proxy from the environment, httpx2's own.
                transport = None if via_proxy else Http1Transport(ssl_context=context)
                self._client = httpx2.AsyncClient(
                    timeout=self._timeout, verify=context or True, transport=transport
                )
        return self._client

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> Completion:
        body = self.request_body(
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=max_tokens if max_tokens is not None else self.max_tokens,
        )
        url = self.endpoint()
        headers = self.headers()
        # Encoded once for every attempt, by pydantic-core's encoder: compact UTF-8 as httpx's own
        # (json.dumps) would make it, in about a third of the time on a turn's 30-40 KB body.
        content = to_json(body)
        client = await self._http()
        started = self._clock()

        async def send() -> httpx2.Response:
            return await client.post(url, content=content, headers=headers)

        try:
            response = await send_with_retries(
                send,
                target=self._target,
                max_retries=self.max_retries,
                sleep=self._sleep,
                error_detail=self.error_detail,
            )
        except httpx2.DecodingError as exc:
            raise self._bad_response(f"the body could not be decoded ({exc})") from exc
        elapsed = self._clock() - started
        if not response.is_success:
            raise self._rejected(response)
        try:
            data = response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise self._bad_response(f"the body is not JSON ({exc})") from exc
        try:
            return self.parse(expect_dict(data, "the response"), elapsed_s=elapsed)
        except WireFormatError as exc:
            raise self._bad_response(str(exc)) from exc

    def error_detail(self, response: httpx2.Response) -> str:
        """The provider's own error message from an error response, with any key redacted."""
        try:
            data: object = response.json()
        except ValueError:
            data = None
        message: object = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                message = error.get("message")
            elif isinstance(error, str):
                message = error
            else:
                message = data.get("message")
        if not isinstance(message, str):
            message = response.text
        return self._redact(" ".join(message.split())[:_MAX_ERROR_CHARS])

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text

    def _rejected(self, response: httpx2.Response) -> ProviderRejected:
        status = response.status_code
        detail = self.error_detail(response)
        return ProviderRejected(
            f"LLM provider {self.describe()} rejected the request with HTTP {status}: "
            f"{detail or '(no error message)'}. " + rejected_hint(self.name, self.kind, status, self.model),
            provider=self.name,
            status=status,
            provider_message=detail,
        )

    def _bad_response(self, detail: str) -> ProviderResponseError:
        return ProviderResponseError(
            f"LLM provider {self.describe()} returned a reply that is not valid: {detail}. {self.wire_hint}",
            provider=self.name,
        )

    @abstractmethod
    def endpoint(self) -> str: ...

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def request_body(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]: ...

    @abstractmethod
    def parse(self, data: dict[str, Any], *, elapsed_s: float) -> Completion:
        """Turn a decoded 2xx body into a Completion; raise WireFormatError when it does not fit."""
