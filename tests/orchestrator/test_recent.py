"""The dedupe window of pushes from channels that keep no event log."""

from __future__ import annotations

import pytest

from orchestrator.intake.recent import RecentKeys
from tests.orchestrator.test_ratelimit import Clock


def test_a_key_repeats_within_the_window_even_after_it_was_answered_and_not_after() -> None:
    clock = Clock()
    recent = RecentKeys(window_s=60, limit=10, clock=clock)
    key = ("cc", "c9", "m1")
    assert [recent.repeat(key), recent.repeat(key)] == [False, True]
    clock.now = 59.0
    assert recent.repeat(key)
    clock.now = 60.0
    assert not recent.repeat(key)
    assert not recent.repeat(("cc", "other-chat", "m1"))  # the chat is part of the key


def test_the_window_holds_at_most_its_limit_forgetting_the_oldest_first() -> None:
    recent = RecentKeys(window_s=60, limit=3, clock=Clock())
    for n in range(4):
        assert not recent.repeat(n)
    assert len(recent) == 3
    assert [recent.repeat(3), recent.repeat(0)] == [True, False]


def test_a_window_needs_a_positive_length_and_limit() -> None:
    with pytest.raises(ValueError, match="window_s must be > 0 and limit >= 1"):
        RecentKeys(window_s=0)
