"""Unattended spend per day, from the ledger's turn and spend_reserved entries, against the budget."""

from __future__ import annotations

from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

from orchestrator.dashboard.spend import unattended_history
from orchestrator.dashboard.spend_history import DaySpend, per_day, window
from orchestrator.proactive.config import Price

PRICES = {"fake/m": Price(input_per_mtok=1.0, output_per_mtok=10.0)}
DAYS = window(date(2026, 11, 26), 3)


def entry(seq: int, at: str, goal: str, tokens: tuple[int, int], **body: Any) -> dict[str, Any]:
    kind = body.pop("kind", "turn")
    return {
        "seq": seq,
        "at": at,
        "kind": kind,
        "goal_id": goal,
        "body": {"input_tokens": tokens[0], "output_tokens": tokens[1], "model": "fake/m", **body},
    }


def test_each_day_counts_what_unattended_goals_spent_that_day_from_their_running_totals() -> None:
    entries = [
        # A heartbeat goal over midnight: 1,000 + 100 tokens the first day, 2,000 + 200 in all.
        entry(1, "2026-11-24T23:00:00+00:00", "hb", (500, 50), unattended=True),
        entry(2, "2026-11-24T23:30:00+00:00", "hb", (1000, 100), unattended=True),
        entry(3, "2026-11-25T00:10:00+00:00", "hb", (2000, 200), unattended=True),
        # A cron goal whose process died after reserving: the reservation is its spend.
        entry(4, "2026-11-26T08:00:00+00:00", "cron", (3000, 300), kind="spend_reserved", index=0),
        # The operator's own goal is not unattended spend.
        entry(5, "2026-11-26T08:00:00+00:00", "chat", (9000, 900), unattended=False),
    ]
    assert per_day(entries, DAYS, ZoneInfo("UTC"), PRICES) == [
        DaySpend(date(2026, 11, 24), 1100, 0.002, True),
        DaySpend(date(2026, 11, 25), 1100, 0.002, True),
        DaySpend(date(2026, 11, 26), 3300, 0.006, True),
    ]
    # The budget's day starts in its own time zone: 23:30 UTC is the next day in Tokyo.
    assert [d.tokens for d in per_day(entries, DAYS, ZoneInfo("Asia/Tokyo"), PRICES)] == [0, 2200, 3300]
    assert per_day(entries[:1], DAYS, ZoneInfo("UTC"), {})[0] == DaySpend(date(2026, 11, 24), 550, 0.0, False)


def test_the_history_shows_each_day_against_the_daily_budget_and_marks_a_day_over_it() -> None:
    days = [
        DaySpend(DAYS[0], 500, 0.25, True),
        DaySpend(DAYS[1], 0, 0.0, True),
        DaySpend(DAYS[2], 1500, 2.0, False),
    ]
    html = unattended_history(days, {"tokens": 1000, "usd": 1.0})
    assert html.count("<rect") == 3
    assert (
        '<tr class="warning"><td>2026-11-26</td><td>1,500</td><td>150% of 1,000</td>'
        "<td>$2.0000 (a model without a price in autonomy.prices)</td><td>200% of $1</td></tr>"
    ) in html
    assert (
        "<tr><td>2026-11-24</td><td>500</td><td>50% of 1,000</td><td>$0.2500</td><td>25% of $1</td></tr>"
        in html
    )
    assert "<td>-</td>" in unattended_history(days, {"tokens": None, "usd": None})
