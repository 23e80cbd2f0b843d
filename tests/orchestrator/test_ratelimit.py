"""The per-channel token bucket."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.ratelimit import ChannelRates, TokenBucket
from orchestrator.metrics import Metrics


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


async def _burst(rates: ChannelRates, role: str, count: int) -> list[str]:
    refused: list[str] = []

    async def refuse(rate: float, wait_s: float) -> None:
        refused.append(f"{rate:g}/min, next in {wait_s:.1f} s")

    for seq in range(count):
        await rates.admit("console", seq, refuse, role=role)
    return refused


@pytest.mark.anyio
async def test_the_owners_burst_on_their_own_console_is_not_throttled() -> None:
    config = NexoConfig.model_validate(
        {
            "agents": [{"id": "nexo", "model": {"provider": "fake"}}],
            "channel_options": {"console": {"overflow": "refuse"}},
        }
    )
    rates = ChannelRates(config, Metrics())
    with anyio.fail_after(5):
        assert await _burst(rates, "owner", 30) == []
        # Contacts on the same channel keep the public-channel default: a burst of 20, then refusals.
        refused = await _burst(rates, "contact", 30)
    assert len(refused) == 10
    assert refused[0].startswith("120/min")
