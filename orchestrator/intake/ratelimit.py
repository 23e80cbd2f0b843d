"""A token bucket per channel server: a burst is fine, a flood waits (or is refused) visibly."""

from __future__ import annotations

import time
from collections.abc import Callable


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
