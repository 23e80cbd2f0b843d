"""The per-channel token bucket."""

from __future__ import annotations

import pytest

from orchestrator.intake.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_tokens_come_back_at_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(60, 2, clock=clock)
    assert [bucket.take(), bucket.take(), bucket.take()] == [True, True, False]
    assert bucket.wait_s() == pytest.approx(1.0)
    clock.now = 0.5
    assert not bucket.take()
    assert bucket.wait_s() == pytest.approx(0.5)
    clock.now = 1.0
    assert bucket.take()
    clock.now = 100.0
    assert [bucket.take(), bucket.take(), bucket.take()] == [True, True, False]  # never above the burst
    assert TokenBucket(60, 1, clock=clock).wait_s() == 0.0


def test_a_bucket_needs_a_positive_rate_and_burst() -> None:
    with pytest.raises(ValueError, match="rate_per_minute must be > 0"):
        TokenBucket(0, 1)
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(1, 0)
