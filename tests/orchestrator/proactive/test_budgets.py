"""Spend budgets checked before each model call: every axis, prices, the day's rollover, restore."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.llm.types import Usage
from orchestrator.proactive.budgets import SpendTracker
from orchestrator.proactive.config import Price, SpendBudgets
from orchestrator.proactive.prices import PriceMissing, find_price, price_keys
from orchestrator.proactive.spend import BudgetHit, Scopes, Spend, SpendRow
from orchestrator.proactive.totals import MAX_TRACKED

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SONNET = "anthropic/claude-sonnet-4-5"
PRICES = {
    SONNET: Price(input_per_mtok=3, output_per_mtok=15, cache_read_per_mtok=0.3, cache_write_per_mtok=3.75),
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.6),
}


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now


def tracker(
    clock: Clock,
    budgets: dict[str, Any] | None = None,
    *,
    zone: str = "UTC",
    prices: dict[str, Price] = PRICES,
) -> SpendTracker:
    return SpendTracker(SpendBudgets.model_validate(budgets or {}), prices, day_timezone=zone, clock=clock)


def usage(input_tokens: int, output_tokens: int = 0) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


def assert_spend(actual: Spend, input_tokens: int, output_tokens: int, usd: float) -> None:
    assert (actual.input_tokens, actual.output_tokens) == (input_tokens, output_tokens)
    assert actual.usd == pytest.approx(usd)


UNLIMITED: dict[str, Any] = {"per_goal": {}, "per_day": {}, "per_heartbeat": {}, "per_cron_entry": {}}


# -- each axis, checked before the call ----------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "unit", "scopes", "axis"),
    [
        ("per_goal", "tokens", Scopes("g1"), "goal_tokens"),
        ("per_goal", "usd", Scopes("g1"), "goal_usd"),
        ("per_day", "tokens", Scopes("g1"), "day_tokens"),
        ("per_day", "usd", Scopes("g1"), "day_usd"),
        ("per_heartbeat", "tokens", Scopes("g1", heartbeat="hb-1"), "heartbeat_tokens"),
        ("per_heartbeat", "usd", Scopes("g1", heartbeat="hb-1"), "heartbeat_usd"),
        ("per_cron_entry", "tokens", Scopes("g1", cron_entry="daily-summary"), "cron_entry_tokens"),
        ("per_cron_entry", "usd", Scopes("g1", cron_entry="daily-summary"), "cron_entry_usd"),
    ],
)
def test_each_budget_refuses_the_call_after_the_one_that_spent_it(
    setting: str, unit: str, scopes: Scopes, axis: str
) -> None:
    # 100k input + 10k output of Sonnet: 110,000 tokens and $0.45 per call.
    limit: float = 200_000 if unit == "tokens" else 0.9
    spent: float = 220_000 if unit == "tokens" else 0.9
    spend = tracker(Clock(), {**UNLIMITED, setting: {unit: limit}})
    assert spend.check(scopes, SONNET) is None
    spend.record(scopes, SONNET, usage(100_000, 10_000))
    assert spend.check(scopes, SONNET) is None
    spend.record(scopes, SONNET, usage(100_000, 10_000))
    hit = spend.check(scopes, SONNET)
    assert hit is not None
    assert (hit.axis, hit.limit) == (axis, limit)
    assert hit.spent == pytest.approx(spent)
    assert f"autonomy.budgets.{setting}.{unit}" in hit.reason


def test_a_goal_budget_belongs_to_that_goal_only() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_goal": {"tokens": 1000}})
    spend.record(Scopes("g1"), SONNET, usage(900, 200))
    hit = spend.check(Scopes("g1"), SONNET)
    assert hit == BudgetHit(
        "goal_tokens",
        1100,
        1000,
        "goal 'g1' has spent its budget: 1,100 of 1,000 tokens; "
        "raise autonomy.budgets.per_goal.tokens to allow more",
        None,
    )
    assert spend.check(Scopes("g2"), SONNET) is None
    assert_spend(spend.spent("goal", "g1"), 900, 200, 0.0057)


def test_a_heartbeat_budget_is_per_run() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_heartbeat": {"tokens": 20_000}})
    run = Scopes("g-hb-1", heartbeat="hb-1")
    spend.record(run, SONNET, usage(19_000, 1_000))
    hit = spend.check(run, SONNET)
    assert hit is not None
    assert hit.reason == (
        "heartbeat run 'hb-1' has spent its budget: 20,000 of 20,000 tokens; "
        "raise autonomy.budgets.per_heartbeat.tokens to allow more"
    )
    assert spend.check(Scopes("g-hb-2", heartbeat="hb-2"), SONNET) is None


def test_the_day_budget_counts_every_goal_and_starts_over_at_midnight() -> None:
    clock = Clock()
    spend = tracker(clock, {**UNLIMITED, "per_day": {"usd": 1.0}})
    spend.record(Scopes("g1"), SONNET, usage(200_000, 10_000))  # $0.75
    spend.record(Scopes("g2"), "gpt-4o-mini", usage(1_000_000, 500_000))  # $0.45
    hit = spend.check(Scopes("g3"), SONNET)
    assert hit is not None
    assert hit.spent == pytest.approx(1.2)
    assert hit == BudgetHit(
        "day_usd",
        hit.spent,
        1.0,
        "today's spend: $1.20 of $1.00; it starts over at midnight UTC, "
        "or raise autonomy.budgets.per_day.usd",
        datetime(2026, 11, 21, tzinfo=UTC),
    )
    clock.now = datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC)
    assert spend.check(Scopes("g3"), SONNET) is not None
    clock.now = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
    assert spend.check(Scopes("g3"), SONNET) is None
    assert spend.day_spent() == Spend(0, 0, 0.0)


def test_the_day_starts_at_midnight_of_the_configured_zone() -> None:
    clock = Clock(datetime(2026, 11, 21, 4, 30, tzinfo=UTC))  # 23:30 on the 20th in New York
    spend = tracker(clock, {**UNLIMITED, "per_day": {"tokens": 1000}}, zone="America/New_York")
    spend.record(Scopes("g1"), SONNET, usage(1000))
    hit = spend.check(Scopes("g1"), SONNET)
    assert hit is not None
    assert hit.resets_at == datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
    assert "midnight America/New_York" in hit.reason
    clock.now = datetime(2026, 11, 21, 4, 59, tzinfo=UTC)
    assert spend.check(Scopes("g1"), SONNET) is not None
    clock.now = datetime(2026, 11, 21, 5, 0, tzinfo=UTC)
    assert spend.day_spent().tokens == 0


def test_a_cron_entry_budget_adds_up_its_fires_for_the_day() -> None:
    clock = Clock()
    spend = tracker(clock, {**UNLIMITED, "per_cron_entry": {"tokens": 5000}})
    for fire in range(5):
        scopes = Scopes(f"g-fire-{fire}", cron_entry="inbox-digest")
        assert spend.check(scopes, SONNET) is None
        spend.record(scopes, SONNET, usage(900, 100))
    hit = spend.check(Scopes("g-fire-5", cron_entry="inbox-digest"), SONNET)
    assert hit is not None
    assert hit.reason == (
        "cron entry 'inbox-digest' has spent today: 5,000 of 5,000 tokens; it starts over at midnight UTC, "
        "or raise autonomy.budgets.per_cron_entry.tokens"
    )
    assert spend.check(Scopes("g-other", cron_entry="backup-check"), SONNET) is None
    clock.now += timedelta(days=1)
    assert spend.check(Scopes("g-fire-6", cron_entry="inbox-digest"), SONNET) is None
    assert spend.spent("cron_entry", "inbox-digest") == Spend(0, 0, 0.0)


def test_a_spent_day_refuses_even_a_fresh_goal() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_goal": {"tokens": 10_000}, "per_day": {"tokens": 100}})
    spend.record(Scopes("g1"), SONNET, usage(500))
    hit = spend.check(Scopes("g2"), SONNET)
    assert hit is not None
    assert hit.axis == "day_tokens"


def test_the_default_budgets_cap_heartbeats_and_the_day() -> None:
    spend = SpendTracker(SpendBudgets(), {}, day_timezone="UTC", clock=Clock())
    run = Scopes("g1", heartbeat="hb-1")
    spend.record(run, "local/llama", usage(20_000))
    hit = spend.check(run, "local/llama")
    assert hit is not None
    assert hit.axis == "heartbeat_tokens"
    spend.record(Scopes("g2"), "local/llama", usage(2_000_000))
    hit = spend.check(Scopes("g3"), "local/llama")
    assert hit is not None
    assert hit.axis == "day_tokens"


# -- prices --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "keys"),
    [
        ("gpt-4o-mini", ("gpt-4o-mini",)),
        ("anthropic/claude-sonnet-4-5", ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5")),
        ("vllm/Qwen/Qwen2.5-7B", ("vllm/Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B")),
    ],
)
def test_price_lookup_tries_the_full_name_then_the_model_alone(model: str, keys: tuple[str, ...]) -> None:
    assert price_keys(model) == keys


def test_find_price_prefers_the_provider_specific_entry() -> None:
    generic = Price(input_per_mtok=1, output_per_mtok=2)
    specific = Price(input_per_mtok=5, output_per_mtok=6)
    prices = {"llama3": generic, "groq/llama3": specific}
    assert find_price(prices, "groq/llama3") is specific
    assert find_price(prices, "ollama/llama3") is generic
    assert find_price(prices, "llama3") is generic
    assert find_price(prices, "mistral") is None


def test_cost_uses_input_output_and_cache_prices() -> None:
    spend = tracker(Clock())
    assert spend.cost(SONNET, usage(1_000_000, 500_000)) == pytest.approx(10.5)
    assert spend.cost("openai/gpt-4o-mini", usage(2_000_000, 1_000_000)) == pytest.approx(0.9)
    assert spend.cost(SONNET, usage(0), cache_read_tokens=1_000_000, cache_write_tokens=1_000_000) == (
        pytest.approx(4.05)
    )
    # Without cache prices, cache tokens are charged as input.
    assert spend.cost("gpt-4o-mini", usage(0), cache_read_tokens=1_000_000) == pytest.approx(0.15)
    assert spend.cost("local/llama", usage(1000, 1000)) is None


def test_record_counts_cache_tokens_as_input() -> None:
    spend = tracker(Clock())
    result = spend.record(Scopes("g1"), SONNET, usage(1000, 100), cache_read_tokens=10_000)
    assert_spend(result, 11_000, 100, 0.0075)
    assert spend.day_spent() == result


def test_a_money_budget_refuses_a_model_without_a_price() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_goal": {"usd": 2.0}})
    with pytest.raises(PriceMissing) as caught:
        spend.check(Scopes("g1"), "ollama/llama3.1")
    assert str(caught.value) == (
        "no price for model 'ollama/llama3.1' while autonomy.budgets.per_goal.usd is set: add "
        "autonomy.prices['ollama/llama3.1' or 'llama3.1'] with input_per_mtok and output_per_mtok "
        "(USD per million tokens), or remove the usd budget"
    )
    assert (caught.value.model, caught.value.setting) == ("ollama/llama3.1", "per_goal")


def test_unpriced_spend_already_counted_makes_a_money_budget_refuse() -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_day": {"usd": 5.0}})
    spend.record(Scopes("g1"), "ollama/llama3.1", usage(5000, 500))
    assert spend.day_spent() == Spend(5000, 500, None)
    with pytest.raises(
        PriceMissing, match=r"no price for model 'ollama/llama3\.1' while autonomy\.budgets\.per_day"
    ):
        spend.check(Scopes("g2"), SONNET)


def test_without_a_money_budget_an_unpriced_model_runs_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spend = tracker(Clock(), {**UNLIMITED, "per_day": {"tokens": 1_000_000}})
    with caplog.at_level(logging.WARNING, logger="nexo.proactive"):
        assert spend.check(Scopes("g1"), "local/phi") is None
        first = spend.record(Scopes("g1"), "local/phi", usage(100, 10))
        spend.record(Scopes("g1"), "local/phi", usage(100, 10))
        spend.record(Scopes("g1"), "local/qwen", usage(100, 10))
    assert first == Spend(100, 10, None)
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        "no price for model 'local/phi': its spend is counted in tokens only; add "
        "autonomy.prices['local/phi' or 'phi']",
        "no price for model 'local/qwen': its spend is counted in tokens only; add "
        "autonomy.prices['local/qwen' or 'qwen']",
    ]


# -- restore and bookkeeping ---------------------------------------------------------------------


def test_restore_rebuilds_today_and_the_open_goals_from_past_calls() -> None:
    clock = Clock()
    spend = tracker(clock, {**UNLIMITED, "per_goal": {"tokens": 10_000}, "per_cron_entry": {"tokens": 3000}})
    spend.record(Scopes("stale"), SONNET, usage(9999))
    yesterday = START - timedelta(days=1)
    spend.restore(
        [
            SpendRow(yesterday, SONNET, 6000, 0, goal="g-long"),
            SpendRow(yesterday, SONNET, 2500, 0, goal="g-old-fire", cron_entry="digest"),
            SpendRow(START - timedelta(hours=3), SONNET, 3000, 1000, goal="g-long"),
            SpendRow(START - timedelta(hours=2), SONNET, 2000, 500, goal="g-fire", cron_entry="digest"),
            SpendRow(START - timedelta(hours=1), "gpt-4o-mini", 1000, 0, goal="g-hb", heartbeat="hb-7"),
        ]
    )
    assert_spend(spend.day_spent(), 6000, 1500, 0.0375 + 0.00015)
    assert_spend(spend.spent("goal", "g-long"), 9000, 1000, 0.018 + 0.024)
    assert spend.spent("goal", "stale") == Spend(0, 0, 0.0)
    assert spend.spent("heartbeat", "hb-7").tokens == 1000
    assert spend.spent("cron_entry", "digest").tokens == 2500  # yesterday's fire is not today's
    long_goal = spend.check(Scopes("g-long"), SONNET)
    assert long_goal is not None
    assert long_goal.axis == "goal_tokens"
    assert spend.check(Scopes("g-fire-2", cron_entry="digest"), SONNET) is None
    spend.record(Scopes("g-fire-2", cron_entry="digest"), SONNET, usage(500))
    cron_hit = spend.check(Scopes("g-fire-3", cron_entry="digest"), SONNET)
    assert cron_hit is not None
    assert cron_hit.axis == "cron_entry_tokens"


def test_restore_with_the_day_in_another_zone() -> None:
    clock = Clock(datetime(2026, 11, 21, 1, 0, tzinfo=UTC))  # 14:00 on the 21st in Auckland
    spend = tracker(clock, zone="Pacific/Auckland")
    spend.restore(
        [
            SpendRow(datetime(2026, 11, 20, 10, 59, tzinfo=UTC), SONNET, 100, 0, goal="g1"),  # 23:59 the 20th
            SpendRow(datetime(2026, 11, 20, 11, 0, tzinfo=UTC), SONNET, 40, 2, goal="g1"),  # 00:00 the 21st
        ]
    )
    assert spend.day_spent().tokens == 42
    assert spend.spent("goal", "g1").tokens == 142


def test_finish_forgets_a_goal_and_a_heartbeat_run() -> None:
    spend = tracker(Clock())
    scopes = Scopes("g1", heartbeat="hb-1")
    spend.record(scopes, SONNET, usage(100))
    spend.finish(goal="g1", heartbeat="hb-1")
    assert spend.spent("goal", "g1") == Spend(0, 0, 0.0)
    assert spend.spent("heartbeat", "hb-1") == Spend(0, 0, 0.0)
    assert spend.day_spent().tokens == 100


def test_totals_of_goals_never_finished_stay_bounded(caplog: pytest.LogCaptureFixture) -> None:
    spend = tracker(Clock(), UNLIMITED)
    with caplog.at_level(logging.WARNING, logger="nexo.proactive"):
        for goal in range(MAX_TRACKED + 1):
            spend.record(Scopes(f"g{goal}"), SONNET, usage(10))
        spend.check(Scopes("g1"), SONNET)  # a read keeps g1 recent
        spend.record(Scopes("g-new"), SONNET, usage(10))
    assert spend.spent("goal", "g0").tokens == 0
    assert spend.spent("goal", "g1").tokens == 10
    assert spend.spent("goal", "g2").tokens == 0
    assert spend.spent("goal", f"g{MAX_TRACKED}").tokens == 10
    assert spend.day_spent().tokens == 10 * (MAX_TRACKED + 2)
    assert [record.getMessage() for record in caplog.records] == [
        f"spend of goal 'g0' no longer tracked: over {MAX_TRACKED} open",
        f"spend of goal 'g2' no longer tracked: over {MAX_TRACKED} open",
    ]


def test_a_naive_clock_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="has no time zone: pass aware datetimes"):
        SpendTracker(
            SpendBudgets(),
            {},
            day_timezone="UTC",
            clock=lambda: datetime(2026, 11, 20, 12, 0),
        )


def test_an_unknown_day_timezone_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Base'"):
        tracker(Clock(), zone="Mars/Base")


@pytest.mark.parametrize("seed", range(20))
def test_the_day_total_is_the_sum_of_the_calls_since_midnight(seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    spend = tracker(clock, UNLIMITED)
    today: list[Spend] = []
    for _ in range(200):
        before = clock.now.date()
        clock.now += timedelta(minutes=rng.randint(0, 240))
        if clock.now.date() != before:
            today.clear()
        model = rng.choice([SONNET, "gpt-4o-mini"])
        scopes = Scopes(f"g{rng.randint(1, 5)}", cron_entry=rng.choice([None, "a", "b"]))
        assert spend.check(scopes, model) is None
        today.append(spend.record(scopes, model, usage(rng.randint(0, 50_000), rng.randint(0, 5000))))
        total = spend.day_spent()
        assert total.input_tokens == sum(item.input_tokens for item in today)
        assert total.output_tokens == sum(item.output_tokens for item in today)
        assert total.usd == pytest.approx(sum(item.usd or 0.0 for item in today))


def test_a_call_is_refused_when_its_bound_does_not_fit_what_is_left() -> None:
    clock = Clock()
    spend = tracker(clock, {"per_cron_entry": {"tokens": 1_000}})
    scopes = Scopes("g-1", cron_entry="e-1")
    spend.record(scopes, "anthropic/claude-sonnet-4-5", usage(300, 15))
    assert spend.check(scopes, "anthropic/claude-sonnet-4-5", next_call=usage(600, 85)) is None
    hit = spend.check(scopes, "anthropic/claude-sonnet-4-5", next_call=usage(600, 86))
    assert hit is not None
    assert hit.axis == "cron_entry_tokens"


def test_a_money_budget_reserves_the_price_of_the_calls_bound() -> None:
    clock = Clock()
    spend = tracker(clock, {"per_day": {"usd": 1.0}})
    model = "anthropic/claude-sonnet-4-5"  # $3 in, $15 out per million tokens
    assert spend.check(Scopes("g-1"), model, next_call=usage(100_000, 46_000)) is None
    hit = spend.check(Scopes("g-1"), model, next_call=usage(100_000, 47_000))
    assert hit is not None
    assert hit.axis == "day_usd"
