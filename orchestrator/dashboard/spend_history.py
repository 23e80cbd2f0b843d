"""Unattended spend per day against the daily autonomy budget, derived from the audit ledger.

The daemon keeps only today's figure; the ledger keeps every unattended model call's spend as the
``turn`` entries (``unattended: true``) and the ``spend_reserved`` entries written before each call.
Both carry the goal's running total, so a goal's spend on a day is its newest total that day minus
its newest total before that day (the day before the first one shown is read too), the way autonomy
rebuilds today's counter after a restart. Days start at midnight in ``autonomy.day_timezone``, as the
budget's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from orchestrator.dashboard.client import Daemon
from orchestrator.llm.types import Usage
from orchestrator.proactive.config import Price
from orchestrator.proactive.prices import find_price, price_of
from shared.protocol.audit.terms import MAX_TAIL

SPEND_KINDS = ("turn", "spend_reserved")


@dataclass(frozen=True)
class DaySpend:
    day: date
    tokens: int
    usd: float
    priced: bool
    """False when a model of that day has no price in ``autonomy.prices`` (its cost counts as 0)."""


def _is_unattended(entry: Mapping[str, Any]) -> bool:
    if entry.get("kind") == "spend_reserved":
        return True
    return bool((entry.get("body") or {}).get("unattended"))


def _totals(entry: Mapping[str, Any], prices: Mapping[str, Price]) -> tuple[int, float, bool]:
    body = entry.get("body") or {}
    usage = Usage(
        input_tokens=int(body.get("input_tokens", 0)), output_tokens=int(body.get("output_tokens", 0))
    )
    price = find_price(prices, str(body.get("model") or ""))
    if price is None:
        return usage.input_tokens + usage.output_tokens, 0.0, False
    usd = price_of(
        price,
        usage,
        cache_read_tokens=int(body.get("cache_read_tokens", 0)),
        cache_write_tokens=int(body.get("cache_write_tokens", 0)),
    )
    return usage.input_tokens + usage.output_tokens, usd, True


def per_day(
    entries: Iterable[Mapping[str, Any]], days: list[date], zone: ZoneInfo, prices: Mapping[str, Price]
) -> list[DaySpend]:
    """Each of ``days``: the unattended tokens and cost of every goal that spent on it."""
    newest: dict[tuple[str, date], Mapping[str, Any]] = {}
    for entry in entries:
        goal = entry.get("goal_id")
        if not goal or not _is_unattended(entry) or not (entry.get("body") or {}).get("model"):
            continue
        day = datetime.fromisoformat(str(entry["at"])).astimezone(zone).date()
        held = newest.get((goal, day))
        if held is None or int(entry["seq"]) > int(held["seq"]):
            newest[(goal, day)] = entry
    spent = {day: [0, 0.0, True] for day in days}
    before: dict[str, tuple[int, float]] = {}
    for (goal, day), entry in sorted(newest.items(), key=lambda item: item[0][1]):
        tokens, usd, priced = _totals(entry, prices)
        earlier_tokens, earlier_usd = before.get(goal, (0, 0.0))
        before[goal] = (tokens, usd)
        if day in spent:
            row = spent[day]
            row[0] = int(row[0]) + max(tokens - earlier_tokens, 0)
            row[1] = float(row[1]) + max(usd - earlier_usd, 0.0)
            row[2] = bool(row[2]) and priced
    return [DaySpend(day, int(t), float(u), bool(p)) for day, (t, u, p) in spent.items()]


def window(today: date, count: int) -> list[date]:
    return [today - timedelta(days=n) for n in reversed(range(count))]


async def read_spend(daemon: Daemon, since: datetime) -> list[dict[str, Any]]:
    """Every turn and spend_reserved entry written at or after ``since``, a page at a time."""
    found: list[dict[str, Any]] = []
    for kind in SPEND_KINDS:
        after: int | None = None
        while True:
            paging = {"since_seq": after} if after is not None else {}
            page = await daemon.tail(kind=kind, since_at=since.isoformat(), limit=MAX_TAIL, **paging)
            found.extend(page)
            if len(page) < MAX_TAIL:
                break
            after = int(page[-1]["seq"])
    return found


async def unattended_days(daemon: Daemon, count: int, now: datetime) -> list[DaySpend]:
    zone = ZoneInfo(str(daemon.budgets.get("day_timezone") or "UTC"))
    days = window(now.astimezone(zone).date(), count)
    # One day more than shown: a goal that spent across the first midnight counts only what it grew.
    since = datetime.combine(days[0] - timedelta(days=1), time(), zone)
    prices = {key: Price.model_validate(value) for key, value in (daemon.budgets.get("prices") or {}).items()}
    return per_day(await read_spend(daemon, since), days, zone, prices)
