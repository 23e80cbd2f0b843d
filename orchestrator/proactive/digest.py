"""The on-return digest: what the agent did while the operator was silent, sent before its answer.

:func:`build_digest` reads audit ledger entries and sums them up in a few plain-text lines:
messages per channel, approvals, cron fires, goals, limits hit and the latest problems.

Cron fires are matched to their goals through the entry's ``goal_id``: a fire's outcome is the final
status of the goal it started (``done`` -> done; ``failed``, ``cancelled`` or ``lost_on_restart`` ->
failed; none yet -> still running), and a fire recorded without a goal started none, so it was missed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.protocol.audit.entries import Entry

PROBLEMS_SHOWN = 3
PROBLEM_CHARS = 120
FAILED_GOAL_STATUSES = frozenset({"failed", "cancelled", "lost_on_restart"})
REPLIED = "replied"
"""The status of a ``channel out`` entry that answers a message (deliveries on nexo's own are ``sent``)."""
DIGEST_KINDS = ("channel", "approval_requested", "approval_answered", "cron_fire", "goal", "notice")
"""The entry kinds a digest reads."""


def needs_digest(last_operator_message_at: datetime | None, now: datetime, after_s: float) -> bool:
    """True when the operator's silence has lasted ``after_s`` seconds (0 turns the digest off).

    Without an earlier message there is nothing to be away from, so no digest.
    """
    if after_s <= 0 or last_operator_message_at is None:
        return False
    return (now - last_operator_message_at).total_seconds() >= after_s


@dataclass(frozen=True, slots=True)
class _Problem:
    at: datetime
    level: str
    message: str


@dataclass
class _Tally:
    received: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    send_failed: Counter[str] = field(default_factory=Counter)
    approvals: Counter[str] = field(default_factory=Counter)
    fires: list[str | None] = field(default_factory=list)
    """The goal id each cron fire started (None: it started none)."""
    goals: Counter[str] = field(default_factory=Counter)
    limits: Counter[str] = field(default_factory=Counter)
    problems: list[_Problem] = field(default_factory=list)

    def empty(self) -> bool:
        parts = (self.received, self.sent, self.send_failed, self.approvals, self.fires, self.goals)
        return not any(parts) and not (self.limits or self.problems)


def _moment(entry: Entry) -> datetime:
    moment = datetime.fromisoformat(entry.at)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"{name}={moment.isoformat()} has no time zone: pass an aware datetime")
    return moment


def _own_exchange(entry: Entry, operator: tuple[str, str] | None) -> bool:
    """The operator's own message, or nexo's reply to it, on the operator's chat: nothing to report."""
    if operator is None or entry.kind != "channel" or entry.source != f"channel:{operator[0]}":
        return False
    body = entry.body
    if body.get("chat_id") != operator[1]:
        return False
    return body.get("direction") == "in" or body.get("status") == REPLIED


def _count(tally: _Tally, entry: Entry, at: datetime) -> None:
    body = entry.body
    if entry.kind == "channel":
        server = entry.source.removeprefix("channel:")
        status = str(body.get("status", ""))
        if body.get("direction") == "in" and status != "duplicate":
            tally.received[server] += 1
        elif body.get("direction") == "out":
            (tally.send_failed if status == "failed" else tally.sent)[server] += 1
    elif entry.kind == "approval_requested":
        tally.approvals["asked"] += 1
    elif entry.kind == "approval_answered":
        if body.get("behavior") == "allow":
            tally.approvals["allowed"] += 1
        elif body.get("answered_by") == "timeout":
            tally.approvals["timed out"] += 1
        else:
            tally.approvals["denied"] += 1
    elif entry.kind == "cron_fire":
        slots = body.get("slots", 1)
        tally.fires.extend([entry.goal_id] * (slots if isinstance(slots, int) and slots > 1 else 1))
    elif entry.kind == "goal":
        status = str(body.get("status", ""))
        if status in ("done", *FAILED_GOAL_STATUSES):
            tally.goals[status] += 1
    elif entry.kind == "notice":
        if body.get("limit"):
            tally.limits[str(body["limit"])] += 1
        if body.get("level") in ("warning", "error"):
            tally.problems.append(_Problem(at, str(body["level"]), str(body.get("message", ""))))


def _parts(*pairs: tuple[int, str]) -> str:
    return ", ".join(f"{count} {label}" for count, label in pairs if count)


def _span(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    if minutes < 60:
        return f"{minutes} min"
    hours = int(minutes / 60 + 0.5)
    return f"{hours} h" if hours < 48 else f"{int(hours / 24 + 0.5)} d"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PROBLEM_CHARS else flat[: PROBLEM_CHARS - 1].rstrip() + "…"


def _summary(tally: _Tally, final_goals: dict[str, str]) -> list[str]:
    lines: list[str] = []
    servers = sorted(set(tally.received) | set(tally.sent) | set(tally.send_failed))
    if servers:
        per_server = []
        for server in servers:
            text = f"{server} {tally.received[server]} in, {tally.sent[server]} out"
            if tally.send_failed[server]:
                text += f" ({tally.send_failed[server]} failed to send)"
            per_server.append(text)
        lines.append(f"- Messages: {'; '.join(per_server)}")
    if tally.approvals:
        answers = _parts(
            (tally.approvals["allowed"], "allowed"),
            (tally.approvals["denied"], "denied"),
            (tally.approvals["timed out"], "timed out"),
        )
        lines.append(f"- Approvals: {tally.approvals['asked']} asked" + (f"; {answers}" if answers else ""))
    if tally.fires:
        outcomes: Counter[str] = Counter()
        for goal_id in tally.fires:
            status = final_goals.get(goal_id) if goal_id is not None else "missed"
            if status in FAILED_GOAL_STATUSES:
                status = "failed"
            outcomes[status or "still running"] += 1
        detail = _parts(
            *((outcomes[label], label) for label in ("done", "failed", "missed", "still running"))
        )
        lines.append(f"- Cron: {len(tally.fires)} fired; {detail}")
    if tally.goals:
        goals = _parts(
            (tally.goals["done"], "finished"),
            (tally.goals["failed"], "failed"),
            (tally.goals["cancelled"], "cancelled"),
            (tally.goals["lost_on_restart"], "lost in a restart"),
        )
        lines.append(f"- Goals: {goals}")
    if tally.limits:
        which = ", ".join(f"{name} ×{count}" for name, count in sorted(tally.limits.items()))
        lines.append(f"- Limits hit: {sum(tally.limits.values())} ({which})")
    if tally.problems:
        levels = Counter(problem.level for problem in tally.problems)
        counts = _parts(
            (levels["error"], "error" if levels["error"] == 1 else "errors"),
            (levels["warning"], "warning" if levels["warning"] == 1 else "warnings"),
        )
        lines.append(f"- Problems: {len(tally.problems)} ({counts})")
    return lines


def build_digest(
    entries: Sequence[Entry],
    *,
    since: datetime,
    now: datetime,
    max_lines: int = 12,
    zone: tzinfo = UTC,
    operator: tuple[str, str] | None = None,
) -> str | None:
    """A short "while you were away" note for the entries after ``since`` up to ``now``.

    None when nothing worth telling happened. Times are shown in ``zone``. Entries up to ``now`` but
    before ``since`` are read only to learn how the goals of cron fires in the window ended.
    ``operator`` (channel server, chat id) names the operator's chat: their own messages there and
    the replies to them are left out, since the operator was there for those.
    """
    since, now = _aware(since, "since"), _aware(now, "now")
    if max_lines < 2:
        raise ValueError(f"max_lines must be at least 2 (a heading and one line); got {max_lines}")
    tally = _Tally()
    final_goals: dict[str, str] = {}
    for entry in entries:
        at = _moment(entry)
        if at > now:
            continue
        if entry.kind == "goal" and entry.goal_id is not None:
            status = str(entry.body.get("status", ""))
            if status == "done" or status in FAILED_GOAL_STATUSES:
                final_goals[entry.goal_id] = status
        if at > since and not _own_exchange(entry, operator):
            _count(tally, entry, at)
    if tally.empty():
        return None
    heading = f"While you were away (since {since.astimezone(zone):%Y-%m-%d %H:%M %Z}, {_span(now - since)}):"
    lines = [heading, *_summary(tally, final_goals)]
    if len(lines) >= max_lines:
        return "\n".join(lines[:max_lines])
    room = max_lines - len(lines)
    latest = sorted(tally.problems, key=lambda problem: problem.at, reverse=True)
    shown = min(PROBLEMS_SHOWN, len(latest), room)
    if len(latest) > shown and shown + 1 > room:
        shown -= 1  # keep a line to say how many more there are
    for problem in latest[:shown]:
        lines.append(f"  - {problem.at.astimezone(zone):%H:%M} {problem.level}: {_short(problem.message)}")
    if len(latest) > shown:
        lines.append(f"  - … {len(latest) - shown} more: `nexo audit tail --kind notice`")
    return "\n".join(lines)
