"""What the pairing gate refused, so that no refusal is acknowledged without a visible record.

Each refusal is also in the audit ledger (one ``pairing`` entry per event) and counted in
``nexo_channel_refused_total``; this tally, per (server, reason, source), is what `nexo status` and
`nexo channel doctor` show, and the first refusal of a source is told to the operator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

NO_SENDER = "no_sender"
"""The reason of an event that carries no sender id on a channel set to refuse those."""
MAX_ROWS = 500
OVERFLOW_SOURCE = "*"
QUIET_REASONS = frozenset({"mention_required", "code_rate", "pending_full", "reply_cap"})
"""Refusals that are the gate working as configured: counted and shown, not told to the operator."""


@dataclass(slots=True)
class Refusal:
    server: str
    reason: str
    source: str
    """The webhook source or chat of a sender-less event; ``-`` for refused senders (not kept per
    sender, so a flood of strangers stays one row)."""
    count: int
    first_at: float
    last_at: float
    fix: str

    def line(self) -> str:
        what = "event" if self.count == 1 else "events"
        source = "" if self.source == "-" else f" (source {self.source})"
        return (
            f"{self.server:<12} REFUSED {self.count} {what} for {describe(self.reason)}{source}. "
            f"Fix: {self.fix}"
        )


def describe(reason: str) -> str:
    if reason == NO_SENDER:
        return "carrying no sender id"
    if reason == "no_source":
        return "carrying neither a sender id nor a valid source name"
    return f"{reason.replace('_', ' ')}"


def fix_for(server: str, reason: str) -> str:
    options = f"channel_options.{server}.pairing"
    if reason == NO_SENDER:
        return (
            f"if the server authenticates its sources (webhook signatures, configured pollers), set "
            f"{options}.no_sender: source; for a channel whose messages carry no user id, set "
            f"{options}.no_sender: principal and {options}.principal: NAME (docs/security.md)"
        )
    if reason in ("unknown_sender", "invalid_sender"):
        return (
            f"see who with `nexo audit tail --kind pairing`; admit a sender you know with "
            f"`nexo pair seed {server} default SENDER`"
        )
    if reason in ("group_disabled", "group_not_allowed"):
        return (
            f"set {options}.group_policy: allowlist and admit the group with "
            f"`nexo pair seed {server} default GROUP --scope group`"
        )
    if reason == "no_source":
        return (
            f"the server must name each event's source in its meta `source` ({server}'s own sources); "
            f"or set {options}.no_sender: principal with a principal: NAME"
        )
    if reason == "dm_disabled":
        return f"set {options}.policy to pairing or allowlist"
    return "see `nexo audit tail --kind pairing`"


class Refusals:
    """The tally of one intake; bounded, so a flood of sources keeps one overflow row per reason."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._rows: dict[tuple[str, str, str], Refusal] = {}
        self._clock = clock

    def note(self, server: str, reason: str, source: str) -> Refusal | None:
        """Count one refusal; its new row when the operator should be told (a source's first)."""
        key = (server, reason, source)
        if key not in self._rows and len(self._rows) >= MAX_ROWS:
            key = (server, reason, OVERFLOW_SOURCE)
        now = self._clock()
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = Refusal(server, reason, key[2], 1, now, now, fix_for(server, reason))
            return row if reason not in QUIET_REASONS and key[2] != OVERFLOW_SOURCE else None
        row.count += 1
        row.last_at = now
        return None

    def rows(self) -> list[Refusal]:
        return sorted(self._rows.values(), key=lambda r: (r.server, r.reason, r.source))

    def as_json(self) -> list[dict[str, Any]]:
        return [asdict(row) for row in self.rows()]
