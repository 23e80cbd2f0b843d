"""Autonomy's configuration models: safe defaults, and errors that name the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from orchestrator.proactive.config import (
    AutonomyConfig,
    Budget,
    HeartbeatConfig,
    Limits,
    Price,
    ProactiveConfig,
    QuietHours,
    SpendBudgets,
)
from orchestrator.proactive.ticks import IDLE_MARKER
from shared.settings import ConfigError, load_config


def test_autonomous_activity_is_off_and_bounded_by_default() -> None:
    config = AutonomyConfig()
    assert config.enabled is True
    assert config.limits == Limits(
        max_actions_per_cycle=20, max_actions_per_hour=50, min_cycle_gap_s=300, quiet_hours=None
    )
    assert config.budgets == SpendBudgets(
        per_goal=Budget(),
        per_day=Budget(tokens=2_000_000),
        per_heartbeat=Budget(tokens=20_000),
        per_cron_entry=Budget(tokens=200_000),
    )
    assert config.prices == {}
    assert (config.day_timezone, config.return_digest_after_s) == ("UTC", 43200)
    assert HeartbeatConfig().enabled is False
    assert HeartbeatConfig().interval_s == 1800
    assert ProactiveConfig().model_dump() == {
        "enabled": False,
        "tick_interval_secs": 900,
        "jitter_pct": 0.1,
        "max_idle_secs": 14400,
    }
    assert QuietHours().model_dump() == {"start": "22:00", "end": "07:00", "timezone": "UTC"}


def test_the_default_heartbeat_prompt_allows_an_idle_answer() -> None:
    assert IDLE_MARKER in HeartbeatConfig().prompt


def test_budget_unlimited_only_without_any_ceiling() -> None:
    assert Budget().unlimited
    assert not Budget(tokens=1).unlimited
    assert not Budget(usd=0.5).unlimited


def test_quiet_hours_expose_parsed_times_and_zone() -> None:
    quiet = QuietHours(start="23:30", end="06:15", timezone="Europe/Berlin")
    assert (quiet.start_time.hour, quiet.start_time.minute) == (23, 30)
    assert (quiet.end_time.hour, quiet.end_time.minute) == (6, 15)
    assert quiet.zone.key == "Europe/Berlin"


def test_a_price_needs_input_and_output_and_may_price_the_cache() -> None:
    price = Price(input_per_mtok=3, output_per_mtok=15, cache_read_per_mtok=0.3)
    assert (price.cache_read_per_mtok, price.cache_write_per_mtok) == (0.3, None)
    with pytest.raises(ValidationError, match="output_per_mtok"):
        Price.model_validate({"input_per_mtok": 3})


INVALID: list[tuple[type[BaseModel], dict[str, Any], str]] = [
    (HeartbeatConfig, {"interval_s": 30}, "greater than or equal to 60"),
    (HeartbeatConfig, {"prompt": ""}, "at least 1 character"),
    (HeartbeatConfig, {"every": 60}, "Extra inputs are not permitted"),
    (ProactiveConfig, {"tick_interval_secs": 10}, "greater than or equal to 30"),
    (ProactiveConfig, {"jitter_pct": 0.6}, "less than or equal to 0.5"),
    (ProactiveConfig, {"jitter_pct": -0.1}, "greater than or equal to 0"),
    (
        ProactiveConfig,
        {"tick_interval_secs": 900, "max_idle_secs": 600},
        "max_idle_secs (600) is below tick_interval_secs (900): raise max_idle_secs to at least 900",
    ),
    (QuietHours, {"start": "25:00"}, "'25:00' is not a time of day: write it as HH:MM"),
    (QuietHours, {"end": "7:00"}, "'7:00' is not a time of day"),
    (QuietHours, {"start": "22:60"}, "'22:60' is not a time of day"),
    (QuietHours, {"start": "09:00", "end": "09:00"}, "start and end are both 09:00"),
    (QuietHours, {"timezone": "Europe/Berln"}, "unknown time zone 'Europe/Berln': use an IANA name"),
    (QuietHours, {"timezone": "../etc/passwd"}, "unknown time zone '../etc/passwd'"),
    (Limits, {"max_actions_per_cycle": 0}, "greater than or equal to 1"),
    (Limits, {"max_actions_per_hour": 0}, "greater than or equal to 1"),
    (Limits, {"min_cycle_gap_s": -1}, "greater than or equal to 0"),
    (Budget, {"tokens": 0}, "greater than or equal to 1"),
    (Budget, {"usd": 0}, "greater than 0"),
    (Price, {"input_per_mtok": -1, "output_per_mtok": 1}, "greater than or equal to 0"),
    (AutonomyConfig, {"day_timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
    (AutonomyConfig, {"return_digest_after_s": -5}, "greater than or equal to 0"),
    (AutonomyConfig, {"kill_switch": True}, "Extra inputs are not permitted"),
    (
        AutonomyConfig,
        {"budgets": {"per_day": {"usd": 5}}},
        "budgets.per_day.usd is set but prices is empty: add prices for the models in use",
    ),
    (
        AutonomyConfig,
        {"prices": {"anthropic/": {"input_per_mtok": 1, "output_per_mtok": 1}}},
        "price key 'anthropic/' is not a model name",
    ),
    (
        AutonomyConfig,
        {"prices": {" gpt": {"input_per_mtok": 1, "output_per_mtok": 1}}},
        "price key ' gpt' is not a model name",
    ),
]


@pytest.mark.parametrize(("model", "data", "message"), INVALID)
def test_invalid_settings_are_refused_with_the_reason(
    model: type[BaseModel], data: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    assert message in str(caught.value)


def test_a_money_budget_with_prices_is_accepted() -> None:
    config = AutonomyConfig.model_validate(
        {
            "budgets": {"per_goal": {"usd": 0.5}},
            "prices": {"anthropic/claude-sonnet-4-5": {"input_per_mtok": 3, "output_per_mtok": 15}},
            "day_timezone": "America/New_York",
        }
    )
    assert config.budgets.per_goal.usd == 0.5
    assert config.prices["anthropic/claude-sonnet-4-5"].output_per_mtok == 15


def test_a_problem_in_the_file_is_reported_with_its_key_path_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "autonomy.yaml"
    path.write_text(
        "limits:\n  quiet_hours:\n    start: '10pm'\n"
        "budgets:\n  per_heartbeat:\n    tokens: 0\n"
        "day_timezone: Nowhere/City\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(AutonomyConfig, path, env={})
    text = str(caught.value)
    assert "limits.quiet_hours.start" in text
    assert "write it as HH:MM on a 24-hour clock" in text
    assert "budgets.per_heartbeat.tokens" in text
    assert "day_timezone" in text
    assert "use an IANA name such as 'UTC'" in text
    assert len(caught.value.problems) == 3
