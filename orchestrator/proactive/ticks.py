"""Ticks: the message that wakes the agent, how to tell an idle answer, and when the next tick comes.

A tick is a small framed message (``<tick at=... reason=...>``) put into the agent's session by the
heartbeat, the proactive loop or a wake after ``sleep``. The agent acts on it, calls ``sleep``, or
answers with :data:`IDLE_MARKER`. Idle answers are not delivered to anyone, and a run of them makes
the proactive loop back off, so an idle agent costs little.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from orchestrator.proactive.config import ProactiveConfig

TICK_TAG = "tick"
IDLE_MARKER = "[idle]"
TickReason = Literal["heartbeat", "proactive", "wake"]
MAX_PENDING_LINES = 10
MAX_PENDING_CHARS = 200

_ATTRIBUTE_ESCAPES = {
    **{code: f"&#{code};" for code in [*range(0x20), 0x7F]},
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord('"'): "&quot;",
    ord("'"): "&#39;",
}
_TEXT_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _attribute(value: str) -> str:
    return value.translate(_ATTRIBUTE_ESCAPES)


def _pending_line(item: str) -> str:
    """One pending item on one escaped line: a newline or ``</tick>`` inside it cannot end the frame."""
    flat = " ".join(_CONTROL.sub(" ", item).split())
    if len(flat) > MAX_PENDING_CHARS:
        flat = flat[: MAX_PENDING_CHARS - 1].rstrip() + "…"
    return f"- {flat.translate(_TEXT_ESCAPES)}"


def render_tick(now: datetime, reason: TickReason, idle_for_s: float, pending: Sequence[str]) -> str:
    """``<tick at="ISO" reason="..." idle_for_s="N">``, the pending items, what to do, ``</tick>``."""
    if now.tzinfo is None:
        raise ValueError(f"tick time {now.isoformat()} has no time zone: pass an aware datetime")
    attributes = {
        "at": now.isoformat(timespec="seconds"),
        "reason": reason,
        "idle_for_s": str(max(0, round(idle_for_s))),
    }
    head = " ".join(f'{key}="{_attribute(value)}"' for key, value in attributes.items())
    items = [item for item in pending if item.strip()]
    lines = [f"<{TICK_TAG} {head}>"]
    if items:
        lines.append("Pending:")
        lines.extend(_pending_line(item) for item in items[:MAX_PENDING_LINES])
        if len(items) > MAX_PENDING_LINES:
            lines.append(f"- … and {len(items) - MAX_PENDING_LINES} more")
    else:
        lines.append("Nothing is pending.")
    lines.append(f"Act on what is due, call sleep to wait for something, or answer {IDLE_MARKER}.")
    lines.append(f"</{TICK_TAG}>")
    return "\n".join(lines)


# -- idle answers --------------------------------------------------------------------------------

_IDLE_CORE = (
    r"(?:i have |i've )?nothing(?: (?:to do|to report|new|pending|needed|needs (?:doing|attention)|to add))?"
    r"|no (?:actions?|action is|changes?|updates?|new updates|pending (?:work|tasks?|items?)|reply)"
    r"(?: (?:needed|required|necessary|to take|is needed))?"
    r"|idle|heartbeat ok|ok|okay|all (?:good|clear|quiet|caught up|up to date)|all is (?:well|quiet)"
    r"|everything (?:is |looks )?(?:fine|good|up to date|quiet)|none|noop|no op|nothing to see here"
)
_IDLE_CLAUSE = re.compile(
    rf"^(?:(?:there is|there's|there are) )?(?:{_IDLE_CORE})"
    r"(?: (?:here|today|so far|for now|right now|now|at the moment|at this time|at present|currently))?$"
)
_CLAUSE_BREAK = re.compile(r"[.,;:!?\n\u2014\u2013]+|\s-\s")
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")


def _normalise(clause: str) -> str:
    text = clause.lower().replace("_", " ").replace("\u2019", "'")
    return " ".join(_NOT_WORD.sub(" ", text).split())


def is_idle_answer(text: str | None) -> bool:
    """True when the agent's answer to a tick says only that there is nothing to do.

    Empty answers, :data:`IDLE_MARKER` on a line of its own, and short stock phrases ("Nothing to
    do.", "HEARTBEAT_OK", "No action needed right now") count; any answer that says more does not.
    """
    if text is None or not text.strip():
        return True
    if any(line.strip() == IDLE_MARKER for line in text.splitlines()):
        return True
    clauses = [_normalise(part) for part in _CLAUSE_BREAK.split(text.replace(IDLE_MARKER, "\n"))]
    words = [clause for clause in clauses if clause]
    return bool(words) and all(_IDLE_CLAUSE.match(clause) for clause in words)


# -- the proactive schedule ----------------------------------------------------------------------


class ProactiveSchedule:
    """Delays between proactive ticks: jittered, doubling over consecutive idle ticks, reset by activity."""

    def __init__(self, config: ProactiveConfig, *, rng: random.Random) -> None:
        self._config = config
        self._rng = rng
        self._base = config.tick_interval_secs
        self.idle_streak = 0
        """Consecutive idle ticks since the last activity."""

    @property
    def base_s(self) -> float:
        """The interval before jitter that the next idle tick would double."""
        return self._base

    def note_activity(self) -> None:
        """Something happened (a message, a tool call): go back to the configured interval."""
        self._base = self._config.tick_interval_secs
        self.idle_streak = 0

    def next_delay(self, idle: bool) -> float:
        """Seconds until the next tick, given whether the tick just handled was idle."""
        if idle:
            self.idle_streak += 1
            self._base = min(self._base * 2, self._config.max_idle_secs)
        else:
            self.note_activity()
        spread = self._config.jitter_pct
        jittered = self._base * (1 + self._rng.uniform(-spread, spread))
        return min(jittered, self._config.max_idle_secs)
