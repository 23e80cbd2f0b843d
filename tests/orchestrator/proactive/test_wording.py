"""Limit notices read as whole sentences and name what really ends the wait."""

from __future__ import annotations

from orchestrator.proactive.config import Limits
from orchestrator.proactive.limits import ActionLimiter
from orchestrator.proactive.spend import Scopes
from orchestrator.proactive.wording import action_cap_text, budget_text, sentence
from tests.orchestrator.proactive.test_budgets import SONNET, UNLIMITED, Clock, tracker, usage


def test_a_heartbeat_budget_notice_is_two_sentences_and_names_the_next_heartbeat() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_heartbeat": {"tokens": 20_000}})
    run = Scopes("g-hb-1", heartbeat="hb-1")
    spend.record(run, SONNET, usage(19_000, 1_000))
    hit = spend.check(run, SONNET)
    assert hit is not None
    assert budget_text("heartbeat", hit) == (
        "heartbeat: Heartbeat run 'hb-1' has spent its budget: 20,000 of 20,000 tokens; raise "
        "autonomy.budgets.per_heartbeat.tokens to allow more. This heartbeat stops here; the next "
        "heartbeat starts with a fresh budget."
    )


def test_a_day_budget_notice_names_when_the_day_starts_over() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_day": {"tokens": 1_000}})
    spend.record(Scopes("g1"), SONNET, usage(900, 200))
    hit = spend.check(Scopes("g1"), SONNET)
    assert hit is not None
    assert hit.resets_at is not None
    text = budget_text("proactive", hit)
    assert text.endswith(
        f"or raise autonomy.budgets.per_day.tokens. Work that needs the model waits until "
        f"{hit.resets_at.isoformat(timespec='minutes')}."
    )


def test_an_hourly_cap_notice_ends_its_sentence_before_the_next() -> None:
    clock = Clock()
    limiter = ActionLimiter(Limits(max_actions_per_hour=1), clock=clock)
    cycle = limiter.start_cycle()
    assert cycle.take_action() is None
    hit = cycle.take_action()
    assert hit is not None
    assert hit.retry_at is not None
    until = hit.retry_at.isoformat(timespec="minutes")
    assert action_cap_text("proactive", "nexo", hit) == (
        "proactive: 1 autonomous actions in the last hour (autonomy.limits.max_actions_per_hour): the next "
        f"is allowed in 60 min. Proactive work of nexo is paused until {until}."
    )


def test_a_sentence_keeps_its_own_final_punctuation() -> None:
    assert sentence("done!") == "Done!"
    assert sentence("  wait  ") == "Wait."
    assert sentence("") == ""
