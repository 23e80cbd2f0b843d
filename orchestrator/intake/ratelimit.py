"""A token bucket per channel server: a burst is fine, a flood waits (or is refused) visibly.

The buckets guard the agent against the people it talks to (contacts, webhook sources), not against
its owner: a message from the owner (the console's one user, a sender in ``pairing.allow_from`` or
paired as owner) takes no token. The owner's spending is bounded by the agent's budgets instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from orchestrator.config.nexo import NexoConfig
from orchestrator.metrics import Metrics
from shared.protocol.pairing import Role

logger = logging.getLogger("nexo.intake")


class TokenBucket:
    """``rate_per_minute`` tokens refill continuously up to ``burst``; each message takes one."""

    def __init__(
        self, rate_per_minute: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate_per_minute <= 0 or burst < 1:
            raise ValueError("rate_per_minute must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_minute / 60.0
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now

    def take(self) -> bool:
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def wait_s(self) -> float:
        """Seconds until the next token (0 when one is available now)."""
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate_per_s


Refuse = Callable[[float, float], Awaitable[None]]
"""Told the channel's rate and the seconds until the next token; answers the sender and acknowledges."""


class ChannelRates:
    """One bucket per channel server, shaped by its ``channel_options``; a hit waits or refuses."""

    def __init__(self, config: NexoConfig, metrics: Metrics | None = None) -> None:
        self._config = config
        self._metrics = metrics
        self._buckets: dict[str, TokenBucket] = {}

    async def admit(self, server: str, seq: int, refuse: Refuse, *, role: Role | str) -> bool:
        """Take a token for message ``seq``: wait for one (queue) or refuse it visibly (refuse)."""
        options = self._config.channel(server)
        if options.rate_per_minute is None or role == "owner":
            return True
        bucket = self._buckets.get(server)
        if bucket is None:
            bucket = self._buckets[server] = TokenBucket(options.rate_per_minute, options.burst)
        if bucket.take():
            return True
        if self._metrics is not None:
            self._metrics.rate_limited.labels(server, options.overflow).inc()
        if options.overflow == "refuse":
            logger.warning("rate limit of %s: message %d refused", server, seq)
            await refuse(options.rate_per_minute, bucket.wait_s())
            return False
        wait = bucket.wait_s()
        logger.warning(
            "rate limit of %s reached: message %d waits %.1f s (messages stay queued in the channel)",
            server,
            seq,
            wait,
        )
        # A timer, not a poll: the bucket says exactly when the next token is there.
        await anyio.sleep(wait)
        while not bucket.take():  # noqa: ASYNC110 -- refill is time-based; there is no event to wait on
            await anyio.sleep(bucket.wait_s())
        return True
