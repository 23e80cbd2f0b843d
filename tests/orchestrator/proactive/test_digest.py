"""The on-return digest, built from ledger entries shaped exactly as the audit server stores them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from orchestrator.proactive.digest import build_digest, needs_digest
from servers.audit.drafts import GoalBody, internal_draft
from shared.protocol.audit.bodies import (
    ApprovalAnsweredBody,
    ApprovalRequestedBody,
    Body,
    ChannelBody,
    CronFireBody,
    NoticeBody,
    ToolCallBody,
    TurnBody,
)
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import Entry, EntryDraft
from shared.protocol.audit.terms import GoalStatus

SINCE = datetime(2026, 11, 20, 21, 4, tzinfo=UTC)
NOW = datetime(2026, 11, 21, 11, 4, tzinfo=UTC)
DIGEST = args_digest({"path": "/srv/backup"})


class Ledger:
    """Entries with consecutive seqs, each at the time given."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, draft: EntryDraft, at: datetime) -> None:
        seq = len(self.entries) + 1
        self.entries.append(
            Entry(
                seq=seq,
                at=at.astimezone(UTC).isoformat(timespec="microseconds"),
                kind=draft.kind,
                source=draft.source,
                agent=draft.agent,
                goal_id=draft.goal_id,
                subject=draft.subject,
                body=draft.body,
                prev_hash=f"{seq - 1:064x}",
                hash=f"{seq:064x}",
            )
        )

    def body(
        self, body: Body, at: datetime, *, source: str = "orchestrator", goal_id: str | None = None
    ) -> None:
        self.add(EntryDraft.of(body, source=source, agent="nexo", goal_id=goal_id), at)

    def channel(self, server: str, direction: str, status: str, at: datetime) -> None:
        body = ChannelBody(direction=direction, chat_id="42", status=status)
        self.body(body, at, source=f"channel:{server}")

    def goal(self, goal_id: str, status: GoalStatus, at: datetime, previous: GoalStatus = "running") -> None:
        body = GoalBody(status=status, previous=previous, goal_kind="daemon", reason="")
        self.add(internal_draft(body, source="audit", agent="nexo", goal_id=goal_id, subject=goal_id), at)

    def notice(self, level: str, message: str, at: datetime, limit: str | None = None) -> None:
        self.body(NoticeBody(level=level, message=message, limit=limit), at)


def hours(value: float) -> datetime:
    return SINCE + timedelta(hours=value)


@pytest.fixture
def night() -> Ledger:
    """Fourteen hours of an agent working alone, with some history before and after the window."""
    ledger = Ledger()
    ledger.channel("console", "in", "received", SINCE)  # the operator's last message: not "away"
    ledger.body(ApprovalRequestedBody(request_id="abcde", tool="shell__run", args_sha256=DIGEST), hours(-1))
    ledger.goal("g-before", "done", hours(-0.5))
    for step in range(3):
        ledger.channel("telegram", "in", "received", hours(1 + step))
        ledger.channel("telegram", "out", "sent", hours(1.1 + step))
    ledger.channel("telegram", "in", "duplicate", hours(1.05))
    ledger.channel("telegram", "out", "failed", hours(4))
    ledger.channel("slack", "in", "received", hours(5))
    ledger.channel("slack", "in", "received", hours(5.5))
    ledger.channel("console", "out", "notice", hours(6))
    for request_id in ("fghij", "kmnop", "qrstu"):
        ledger.body(
            ApprovalRequestedBody(request_id=request_id, tool="shell__run", args_sha256=DIGEST), hours(2)
        )
    ledger.body(
        ApprovalAnsweredBody(request_id="fghij", behavior="allow", answered_by="channel:telegram"), hours(2.1)
    )
    ledger.body(
        ApprovalAnsweredBody(request_id="kmnop", behavior="deny", answered_by="channel:telegram"), hours(2.2)
    )
    ledger.body(ApprovalAnsweredBody(request_id="qrstu", behavior="deny", answered_by="timeout"), hours(2.3))
    for fire, goal_id in enumerate(("g-c1", "g-c2", None, "g-c4")):
        body = CronFireBody(
            job_id="inbox-digest", fire_id=f"f{fire}", scheduled_for=hours(fire + 1).isoformat()
        )
        ledger.body(body, hours(fire + 1), source="cron", goal_id=goal_id)
    ledger.goal("g-c1", "done", hours(1.5))
    ledger.goal("g-c2", "failed", hours(2.5))
    ledger.goal("g-c4", "running", hours(4), previous="queued")
    ledger.goal("g-t1", "done", hours(1.2))
    ledger.goal("g-t2", "done", hours(3.2))
    ledger.goal("g-x", "lost_on_restart", hours(7))
    ledger.body(
        TurnBody(index=0, outcome="answered", input_tokens=900, output_tokens=80), hours(1.2), goal_id="g-t1"
    )
    tool = ToolCallBody(tool="files__read", args_sha256=DIGEST, duration_ms=3, outcome="ok")
    ledger.body(tool, hours(1.15), goal_id="g-t1")
    ledger.notice("info", "heartbeat run hb-3 started", hours(3))
    ledger.notice("warning", "channel slack reconnecting after 3 failures", hours(8))
    ledger.notice(
        "error",
        "dead letter telegram:812: failed 3 times; last error: ValueError: the message was cut at 4096 bytes",
        hours(9),
        limit="max_attempts",
    )
    ledger.notice("warning", "autonomous actions capped for this hour", hours(10), limit="actions_per_hour")
    ledger.notice(
        "error",
        "provider anthropic unavailable: 529 overloaded\n\n"
        + "the request was retried 4 times over 93 s before giving up; " * 4,
        hours(12),
    )
    ledger.channel("telegram", "in", "received", NOW + timedelta(seconds=1))  # after now: not counted
    return ledger


def test_the_digest_sums_up_what_happened_while_the_operator_was_away(night: Ledger) -> None:
    assert build_digest(night.entries, since=SINCE, now=NOW) == "\n".join(
        [
            "While you were away (since 2026-11-20 21:04 UTC, 14 h):",
            "- Messages: console 0 in, 1 out; slack 2 in, 0 out; telegram 3 in, 3 out (1 failed to send)",
            "- Approvals: 3 asked; 1 allowed, 1 denied, 1 timed out",
            "- Cron: 4 fired; 1 done, 1 failed, 1 missed, 1 still running",
            "- Goals: 3 finished, 1 failed, 1 lost in a restart",
            "- Limits hit: 2 (actions_per_hour ×1, max_attempts ×1)",
            "- Problems: 4 (2 errors, 2 warnings)",
            "  - 09:04 error: provider anthropic unavailable: 529 overloaded the request was retried 4 times "
            "over 93 s before giving up; the request…",
            "  - 07:04 warning: autonomous actions capped for this hour",
            "  - 06:04 error: dead letter telegram:812: failed 3 times; last error: ValueError: the message "
            "was cut at 4096 bytes",
            "  - … 1 more: `nexo audit tail --kind notice`",
        ]
    )


def test_times_are_shown_in_the_zone_asked_for(night: Ledger) -> None:
    digest = build_digest(night.entries, since=SINCE, now=NOW, zone=ZoneInfo("Europe/Berlin"))
    assert digest is not None
    lines = digest.splitlines()
    assert lines[0] == "While you were away (since 2026-11-20 22:04 CET, 14 h):"
    assert lines[7].startswith("  - 10:04 error: provider anthropic unavailable")


def test_max_lines_bounds_the_digest_and_keeps_the_count_of_what_is_left_out(night: Ledger) -> None:
    digest = build_digest(night.entries, since=SINCE, now=NOW, max_lines=9)
    assert digest is not None
    lines = digest.splitlines()
    assert len(lines) == 9
    assert lines[-2].startswith("  - 09:04 error: provider anthropic")
    assert lines[-1] == "  - … 3 more: `nexo audit tail --kind notice`"
    short = build_digest(night.entries, since=SINCE, now=NOW, max_lines=3)
    assert short is not None
    assert short.splitlines() == [
        "While you were away (since 2026-11-20 21:04 UTC, 14 h):",
        "- Messages: console 0 in, 1 out; slack 2 in, 0 out; telegram 3 in, 3 out (1 failed to send)",
        "- Approvals: 3 asked; 1 allowed, 1 denied, 1 timed out",
    ]


def test_a_later_window_sees_only_its_own_entries(night: Ledger) -> None:
    digest = build_digest(night.entries, since=hours(8.5), now=NOW)
    assert digest == "\n".join(
        [
            "While you were away (since 2026-11-21 05:34 UTC, 6 h):",
            "- Limits hit: 2 (actions_per_hour ×1, max_attempts ×1)",
            "- Problems: 3 (2 errors, 1 warning)",
            "  - 09:04 error: provider anthropic unavailable: 529 overloaded the request was retried 4 times "
            "over 93 s before giving up; the request…",
            "  - 07:04 warning: autonomous actions capped for this hour",
            "  - 06:04 error: dead letter telegram:812: failed 3 times; last error: ValueError: the message "
            "was cut at 4096 bytes",
        ]
    )


def quiet_night() -> Ledger:
    """Only turns, info notices, a goal still running and a duplicate: nothing to report."""
    ledger = Ledger()
    ledger.body(TurnBody(index=0, outcome="answered"), hours(1), goal_id="g-hb")
    ledger.notice("info", "heartbeat run hb-4 was idle", hours(2))
    ledger.goal("g-hb", "running", hours(1), previous="queued")
    ledger.channel("console", "in", "duplicate", hours(3))
    return ledger


def test_nothing_worth_telling_gives_no_digest() -> None:
    assert build_digest(quiet_night().entries, since=SINCE, now=NOW) is None
    assert build_digest([], since=SINCE, now=NOW) is None


def test_short_absences_are_counted_in_minutes_and_long_ones_in_days() -> None:
    ledger = Ledger()
    ledger.goal("g1", "done", SINCE + timedelta(minutes=5))
    minutes = build_digest(ledger.entries, since=SINCE, now=SINCE + timedelta(minutes=45))
    days = build_digest(ledger.entries, since=SINCE, now=SINCE + timedelta(days=3, hours=2))
    assert minutes is not None
    assert days is not None
    assert minutes.splitlines()[0] == "While you were away (since 2026-11-20 21:04 UTC, 45 min):"
    assert days.splitlines()[0] == "While you were away (since 2026-11-20 21:04 UTC, 3 d):"
    assert minutes.splitlines()[1] == "- Goals: 1 finished"


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="since=2026-11-20T21:04:00 has no time zone"):
        build_digest([], since=SINCE.replace(tzinfo=None), now=NOW)
    with pytest.raises(ValueError, match="max_lines must be at least 2"):
        build_digest([], since=SINCE, now=NOW, max_lines=1)


@pytest.mark.parametrize(
    ("last", "now", "after_s", "expected"),
    [
        (SINCE, SINCE + timedelta(hours=12), 43200, True),
        (SINCE, SINCE + timedelta(hours=12) - timedelta(seconds=1), 43200, False),
        (SINCE, SINCE + timedelta(days=3), 43200, True),
        (SINCE, SINCE + timedelta(days=3), 0, False),
        (None, NOW, 43200, False),
        (SINCE, SINCE + timedelta(minutes=5), 60, True),
    ],
)
def test_needs_digest_after_a_long_enough_silence(
    last: datetime | None, now: datetime, after_s: float, expected: bool
) -> None:
    assert needs_digest(last, now, after_s) is expected


def test_the_operators_own_exchange_is_left_out_and_what_autonomy_delivered_is_counted() -> None:
    ledger = Ledger()
    minute = timedelta(minutes=1)
    # The operator's last message before leaving, and the reply to it.
    ledger.body(
        ChannelBody(direction="in", chat_id="op", status="received"), SINCE + minute, source="channel:console"
    )
    ledger.body(
        ChannelBody(direction="out", chat_id="op", status="replied"),
        SINCE + 2 * minute,
        source="channel:console",
    )
    # While away: a heartbeat answer and a [limit] notice to the operator, a contact's exchange.
    ledger.body(
        ChannelBody(direction="out", chat_id="op", status="sent"),
        SINCE + 60 * minute,
        source="channel:console",
    )
    ledger.body(
        ChannelBody(direction="out", chat_id="op", status="sent"),
        SINCE + 90 * minute,
        source="channel:console",
    )
    ledger.body(
        ChannelBody(direction="in", chat_id="7", status="received"),
        SINCE + 95 * minute,
        source="channel:telegram",
    )
    ledger.body(
        ChannelBody(direction="out", chat_id="7", status="replied"),
        SINCE + 96 * minute,
        source="channel:telegram",
    )
    digest = build_digest(ledger.entries, since=SINCE, now=NOW, operator=("console", "op"))
    assert digest == (
        "While you were away (since 2026-11-20 21:04 UTC, 14 h):\n"
        "- Messages: console 0 in, 2 out; telegram 1 in, 1 out"
    )


def test_only_the_operators_exchange_leaves_nothing_to_tell() -> None:
    ledger = Ledger()
    ledger.body(
        ChannelBody(direction="in", chat_id="op", status="received"),
        SINCE + timedelta(seconds=1),
        source="channel:console",
    )
    ledger.body(
        ChannelBody(direction="out", chat_id="op", status="replied"),
        SINCE + timedelta(seconds=5),
        source="channel:console",
    )
    assert build_digest(ledger.entries, since=SINCE, now=NOW, operator=("console", "op")) is None


def test_one_missed_row_counts_every_slot_it_stands_for() -> None:
    ledger = Ledger()
    body = CronFireBody(job_id="c_1", fire_id="-", scheduled_for="2026-11-21T09:00", status="missed", slots=3)
    ledger.body(body, SINCE + timedelta(hours=1), source="cron:c_1")
    digest = build_digest(ledger.entries, since=SINCE, now=NOW)
    assert digest is not None
    assert digest.splitlines()[1] == "- Cron: 3 fired; 3 missed"
