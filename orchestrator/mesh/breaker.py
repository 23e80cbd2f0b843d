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
    """Closed: connect freely with growing backoff. Open: wait out the cooldown. Half-open: one trial."""

    config: SupervisionConfig
    rng: Callable[[], float] = field(default=random.random)
    state: BreakerState = "closed"
    failures: int = 0

    def record_success(self) -> None:
        self.state = "closed"
        self.failures = 0

    def record_failure(self) -> None:
        self.failures += 1
        if self.state == "half_open" or self.failures >= self.config.failure_threshold:
            self.state = "open"

    def next_delay(self) -> float:
        """Seconds to wait before the next connect attempt; moves open -> half_open."""
        if self.state == "open":
            self.state = "half_open"
            return self.config.open_cooldown_s
        if self.failures == 0:
            return 0.0
        base = min(self.config.max_backoff_s, self.config.initial_backoff_s * 2 ** (self.failures - 1))
        spread = base * self.config.jitter
        delay: float = max(0.0, base - spread + 2 * spread * self.rng())
        return delay
