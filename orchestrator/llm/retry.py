"""Retrying HTTP sends: exponential backoff with full jitter, honouring Retry-After."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2

from orchestrator.llm.errors import ProviderUnavailable, unavailable_hint

logger = logging.getLogger("nexo.llm")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_AFTER_CAP_S = 60.0

# Jitter only spreads load; it needs no cryptographic strength.
_jitter = random.SystemRandom()


@dataclass(frozen=True, slots=True)
class RetryTarget:
    """Who is being called, for log lines and error messages."""

    name: str
    kind: str
    base_url: str
    label: str  # the provider's describe(), used in error messages


def is_retryable_status(status: int) -> bool:
    # 408 and 429 are the provider asking us to come back; 5xx (Anthropic's 529 included) is its trouble.
    return status in (408, 429) or 500 <= status <= 599


def backoff_delay(attempt: int, *, rand: Callable[[], float] = _jitter.random) -> float:
    """Full-jitter delay before retry number `attempt` (0-based)."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(attempt, 32))
    return rand() * ceiling


def parse_retry_after(value: str | None, *, now: Callable[[], datetime] | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), capped; None if unusable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = now() if now is not None else datetime.now(UTC)
        seconds = (when - current).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def describe_transport_error(exc: httpx2.TransportError) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


async def send_with_retries(
    send: Callable[[], Awaitable[httpx2.Response]],
    *,
    target: RetryTarget,
    max_retries: int,
    sleep: Callable[[float], Awaitable[None]],
    error_detail: Callable[[httpx2.Response], str],
    rand: Callable[[], float] = _jitter.random,
) -> httpx2.Response:
    """Send until a non-retryable answer arrives; raise ProviderUnavailable once retries run out.

    The returned response may still be an error status: only transient failures are handled here.
    """
    attempt = 0
    while True:
        retry_after: float | None = None
        try:
            response = await send()
        except httpx2.TransportError as exc:
            reason = describe_transport_error(exc)
            detail = reason
        else:
            if not is_retryable_status(response.status_code):
                return response
            reason = f"HTTP {response.status_code}"
            provider_says = error_detail(response)
            detail = f"{reason}: {provider_says}" if provider_says else reason
            retry_after = parse_retry_after(response.headers.get("retry-after"))
        if attempt >= max_retries:
            attempts = attempt + 1
            raise ProviderUnavailable(
                f"LLM provider {target.label} is unavailable after {attempts} attempt(s); "
                f"last error: {detail}. " + unavailable_hint(target.name, target.kind, target.base_url),
                provider=target.name,
                base_url=target.base_url,
                attempts=attempts,
                reason=detail,
            )
        delay = retry_after if retry_after is not None else backoff_delay(attempt, rand=rand)
        # The reason is a status or exception class and message: never a body, never a header.
        logger.warning(
            "LLM provider '%s' attempt %d/%d failed (%s); retrying in %.2fs",
            target.name,
            attempt + 1,
            max_retries + 1,
            reason,
            delay,
        )
        await sleep(delay)
        attempt += 1
