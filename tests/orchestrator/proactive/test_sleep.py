"""The sleep tool: its schema, argument checks, and the cache-aware choice of how long to sleep."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from orchestrator.proactive.sleep import (
    CACHE_AMORTISED_MS,
    CACHE_WARM_MS,
    MAX_SLEEP_MS,
    MIN_SLEEP_MS,
    SLEEP_INPUT_SCHEMA,
    SLEEP_TOOL,
    SLEEP_TOOL_NAME,
    SleepChoice,
    SleepRequest,
    choose_sleep,
    parse_sleep,
)


def test_the_tool_is_named_sleep_and_its_schema_bounds_the_request() -> None:
    assert SLEEP_TOOL.name == SLEEP_TOOL_NAME == "sleep"
    assert SLEEP_TOOL.input_schema is SLEEP_INPUT_SCHEMA
    duration = SLEEP_INPUT_SCHEMA["properties"]["duration_ms"]
    assert (duration["type"], duration["minimum"], duration["maximum"]) == ("integer", 1000, 86_400_000)
    assert SLEEP_INPUT_SCHEMA["properties"]["reason"]["maxLength"] == 500
    assert SLEEP_INPUT_SCHEMA["required"] == ["duration_ms"]
    assert SLEEP_INPUT_SCHEMA["additionalProperties"] is False


@pytest.mark.parametrize(
    ("asked", "chosen"),
    [
        (0, 60_000),
        (1_000, 60_000),
        (59_999, 60_000),
        (60_000, 60_000),
        (200_000, 200_000),
        (270_000, 270_000),
        (270_001, 270_000),
        (480_000, 270_000),
        (734_999, 270_000),
        (735_000, 1_200_000),  # the midpoint goes to the longer sleep
        (900_000, 1_200_000),
        (1_199_999, 1_200_000),
        (1_200_000, 1_200_000),
        (3_600_000, 3_600_000),
        (86_400_000, 86_400_000),
        (86_400_001, 86_400_000),
        (10**12, 86_400_000),
    ],
)
def test_sleeps_snap_out_of_the_cache_window_and_into_bounds(asked: int, chosen: int) -> None:
    choice = choose_sleep(asked)
    assert choice.duration_ms == chosen
    assert choice.adjusted is (asked != chosen)


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (30_000, SleepChoice(60_000, True, "asked for 30 s; sleeping 60 s: the shortest sleep is 1 min")),
        (
            480_000,
            SleepChoice(
                270_000,
                True,
                "asked for 8 min; sleeping 4.5 min: a wake within 4.5 min finds the prompt cache still warm",
            ),
        ),
        (
            900_000,
            SleepChoice(
                1_200_000,
                True,
                "asked for 15 min; sleeping 20 min: a wait of 20 min or more amortises the prompt-cache miss",
            ),
        ),
        (
            90_000_000,
            SleepChoice(86_400_000, True, "asked for 25 h; sleeping 24 h: the longest sleep is 24 h"),
        ),
        (7_200_000, SleepChoice(7_200_000, False, "sleeping 2 h")),
    ],
)
def test_the_note_says_what_was_chosen_and_why(asked: int, expected: SleepChoice) -> None:
    assert choose_sleep(asked) == expected


@pytest.mark.parametrize("seed", range(10))
def test_a_chosen_sleep_is_never_in_the_cache_window_and_grows_with_the_request(seed: int) -> None:
    rng = random.Random(seed)
    asked = sorted(rng.randint(0, 2 * MAX_SLEEP_MS) for _ in range(500))
    chosen = [choose_sleep(ms).duration_ms for ms in asked]
    for ms in chosen:
        assert MIN_SLEEP_MS <= ms <= MAX_SLEEP_MS
        assert not CACHE_WARM_MS < ms < CACHE_AMORTISED_MS
    assert chosen == sorted(chosen)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"duration_ms": 1_200_000}, SleepRequest(1_200_000, "")),
        (
            {"duration_ms": 60_000, "reason": "waiting for the build"},
            SleepRequest(60_000, "waiting for the build"),
        ),
        ({"duration_ms": 300_000.0}, SleepRequest(300_000, "")),
    ],
)
def test_valid_arguments_become_a_request(arguments: dict[str, Any], expected: SleepRequest) -> None:
    assert parse_sleep(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "duration_ms must be an integer number of milliseconds, e.g. 1200000; got None"),
        (
            {"duration_ms": "20m"},
            "duration_ms must be an integer number of milliseconds, e.g. 1200000; got '20m'",
        ),
        ({"duration_ms": True}, "duration_ms must be an integer number of milliseconds"),
        ({"duration_ms": 1.5}, "got 1.5"),
        ({"duration_ms": 999}, "duration_ms must be between 1000 and 86400000 (24 h); got 999"),
        ({"duration_ms": 86_400_001}, "got 86400001"),
        ({"duration_ms": 60_000, "reason": 7}, "reason must be a string; got 7"),
        ({"duration_ms": 60_000, "reason": "x" * 501}, "reason is 501 characters; keep it to 500"),
        ({"duration_ms": 60_000, "seconds": 60}, "sleep takes duration_ms and reason only; remove 'seconds'"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_send_instead(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_sleep(arguments)
