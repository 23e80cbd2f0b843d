"""The per-server circuit breaker: what counts as a failure, when it opens, how long each wait is."""

from __future__ import annotations

from orchestrator.mesh.breaker import Breaker
from orchestrator.mesh.config import SupervisionConfig

SUPERVISION = SupervisionConfig(jitter=0.0)


def waits(breaker: Breaker, failures: int) -> list[tuple[str, float]]:
    """(state, delay) before each reconnect, for ``failures`` failed connects in a row."""
    seen: list[tuple[str, float]] = []
    for _ in range(failures):
        breaker.record_failure()
        delay = breaker.next_delay()
        seen.append((breaker.state, delay))
    return seen


def test_after_a_long_lived_connection_drops_it_takes_the_full_threshold_of_failures_to_open() -> None:
    breaker = Breaker(SUPERVISION)
    assert breaker.next_delay() == 0.0
    breaker.record_stable()
    assert (breaker.failures, breaker.state, breaker.next_delay()) == (0, "closed", 0.25)
    assert waits(breaker, 5) == [
        ("closed", 0.25),
        ("closed", 0.5),
        ("closed", 1.0),
        ("closed", 2.0),
        ("half_open", 60.0),
    ]


def test_a_half_open_trial_that_fails_opens_again_and_one_that_lasts_closes() -> None:
    breaker = Breaker(SUPERVISION)
    waits(breaker, 5)
    assert waits(breaker, 1) == [("half_open", 60.0)]
    breaker.record_stable()
    assert (breaker.state, breaker.failures, breaker.next_delay()) == ("closed", 0, 0.25)


def test_a_server_over_http_is_retried_with_a_short_bounded_backoff_and_never_opens() -> None:
    breaker = Breaker(SUPERVISION, opens=False)
    assert waits(breaker, 8) == [
        ("closed", 0.25),
        ("closed", 0.5),
        ("closed", 1.0),
        ("closed", 2.0),
        ("closed", 2.0),
        ("closed", 2.0),
        ("closed", 2.0),
        ("closed", 2.0),
    ]


def test_the_jitter_spreads_each_wait_within_its_bounds() -> None:
    low = Breaker(SupervisionConfig(jitter=0.2), rng=lambda: 0.0, opens=False)
    high = Breaker(SupervisionConfig(jitter=0.2), rng=lambda: 1.0, opens=False)
    assert [delay for _, delay in waits(low, 5)] == [0.2, 0.4, 0.8, 1.6, 1.6]
    assert [round(delay, 6) for _, delay in waits(high, 5)] == [0.3, 0.6, 1.2, 2.4, 2.4]
