"""The ``sleep`` tool: in an autonomous turn the agent may pause itself instead of polling.

The runtime intercepts the call, ends the turn and wakes the agent later with a ``wake`` tick. How
long it sleeps is adjusted for the provider's prompt cache, which keeps a conversation prefix for
about five minutes after its last use:

- up to 270 s the wake still finds the cache warm (30 s of margin under five minutes), so the next
  turn reads the long prefix at the cache price;
- from 1200 s the wait is long enough that one full-price cache miss is small against the time
  waited;
- in between, the wake pays the miss without having waited long enough to be worth it, so a request
  there is moved to whichever edge is nearer (a tie goes to the longer sleep).

Sleeps shorter than a minute are raised to a minute (waking more often is polling, which the
proactive ticks already do), and nothing sleeps longer than a day.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.llm.types import ToolSpec

SLEEP_TOOL_NAME = "sleep"
MIN_REQUEST_MS = 1_000
MAX_SLEEP_MS = 86_400_000
MIN_SLEEP_MS = 60_000
CACHE_WARM_MS = 270_000
CACHE_AMORTISED_MS = 1_200_000
MAX_REASON_CHARS = 500

SLEEP_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "duration_ms": {
            "type": "integer",
            "minimum": MIN_REQUEST_MS,
            "maximum": MAX_SLEEP_MS,
            "description": "How long to sleep, in milliseconds (1 s to 24 h).",
        },
        "reason": {
            "type": "string",
            "maxLength": MAX_REASON_CHARS,
            "description": "What you are waiting for, kept with the goal for the operator to see.",
        },
    },
    "required": ["duration_ms"],
    "additionalProperties": False,
}
SLEEP_TOOL = ToolSpec(
    name=SLEEP_TOOL_NAME,
    description=(
        "Pause until later when there is nothing to do now but something to check afterwards (a reply, "
        'a build, a deadline). You are woken with a <tick reason="wake">. Sleeps under 1 min are '
        "raised to 1 min, and sleeps between 4.5 and 20 min are moved to the nearer of the two."
    ),
    input_schema=SLEEP_INPUT_SCHEMA,
)


@dataclass(frozen=True, slots=True)
class SleepRequest:
    duration_ms: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SleepChoice:
    duration_ms: int
    """How long the runtime actually sleeps."""
    adjusted: bool
    """True when that differs from what was asked."""
    note: str
    """One line for the tool result and the log: what was chosen and why."""


def parse_sleep(arguments: Mapping[str, Any]) -> SleepRequest:
    """The tool's arguments as a request; a ValueError the model can act on when they are wrong."""
    unknown = sorted(set(arguments) - {"duration_ms", "reason"})
    if unknown:
        raise ValueError(f"sleep takes duration_ms and reason only; remove {', '.join(map(repr, unknown))}")
    duration = arguments.get("duration_ms")
    if isinstance(duration, float) and duration.is_integer():
        duration = int(duration)
    if not isinstance(duration, int) or isinstance(duration, bool):
        raise ValueError(
            f"duration_ms must be an integer number of milliseconds, e.g. 1200000; got {duration!r}"
        )
    if not MIN_REQUEST_MS <= duration <= MAX_SLEEP_MS:
        raise ValueError(
            f"duration_ms must be between {MIN_REQUEST_MS} and {MAX_SLEEP_MS} (24 h); got {duration}"
        )
    reason = arguments.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError(f"reason must be a string; got {reason!r}")
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"reason is {len(reason)} characters; keep it to {MAX_REASON_CHARS}")
    return SleepRequest(duration, reason)


def _human(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def choose_sleep(duration_ms: int) -> SleepChoice:
    """The sleep actually taken for a requested ``duration_ms`` (see the module docstring)."""
    if duration_ms < MIN_SLEEP_MS:
        chosen, why = MIN_SLEEP_MS, "the shortest sleep is 1 min"
    elif duration_ms > MAX_SLEEP_MS:
        chosen, why = MAX_SLEEP_MS, "the longest sleep is 24 h"
    elif CACHE_WARM_MS < duration_ms < CACHE_AMORTISED_MS:
        if duration_ms - CACHE_WARM_MS < CACHE_AMORTISED_MS - duration_ms:
            chosen, why = CACHE_WARM_MS, "a wake within 4.5 min finds the prompt cache still warm"
        else:
            chosen, why = CACHE_AMORTISED_MS, "a wait of 20 min or more amortises the prompt-cache miss"
    else:
        return SleepChoice(duration_ms, False, f"sleeping {_human(duration_ms)}")
    return SleepChoice(chosen, True, f"asked for {_human(duration_ms)}; sleeping {_human(chosen)}: {why}")
