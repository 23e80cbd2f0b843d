"""A three-state circuit breaker with exponential backoff and jitter."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.mesh.config import SupervisionConfig

BreakerState = Literal["closed", "open", "half_open"]


@dataclass
class Breaker:
    """Closed: connect freely with growing backoff. Open: wait out the cooldown. Half-open: one trial.

    ``opens`` is False for servers reached over HTTP: a failed connect there costs one refused TCP
    connection, and the usual cause is the server being restarted, so they are retried with the
    backoff capped at ``http_max_backoff_s`` and never left waiting out a cooldown.
    """

    config: SupervisionConfig
    rng: Callable[[], float] = field(default=random.random)
    opens: bool = True
    state: BreakerState = "closed"
    failures: int = 0
    _dropped: bool = False

    def record_stable(self) -> None:
        """A connection that lived ``stable_after_s`` ended: the count starts over, and the next
        connect comes after ``initial_backoff_s``."""
        self.state = "closed"
        self.failures = 0
        self._dropped = True

    def record_failure(self) -> None:
        """A failed connect, or a connection that died within ``stable_after_s``."""
        self.failures += 1
        if self.opens and (self.state == "half_open" or self.failures >= self.config.failure_threshold):
            self.state = "open"

    def next_delay(self) -> float:
        """Seconds to wait before the next connect attempt; moves open -> half_open."""
        if self.state == "open":
            self.state = "half_open"
            return self.config.open_cooldown_s
        if self.failures == 0:
            if not self._dropped:
                return 0.0
            self._dropped = False
            return self._spread(self.config.initial_backoff_s)
        cap = self.config.max_backoff_s
        if not self.opens:
            cap = min(cap, self.config.http_max_backoff_s)
        return self._spread(min(cap, self.config.initial_backoff_s * 2 ** (self.failures - 1)))

    def _spread(self, base: float) -> float:
        spread = base * self.config.jitter
        return max(0.0, base - spread + 2 * spread * self.rng())
