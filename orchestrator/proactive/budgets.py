"""Spend budgets: tokens and money per goal, per day, per heartbeat run and per cron entry.

:meth:`SpendTracker.check` runs before every model call with a bound on what that call can cost
(:func:`orchestrator.proactive.estimate.estimate_call`: its actual prompt and its ``max_tokens``), and
refuses the call unless the spend so far plus that bound fits every budget, so no budget is overrun;
:meth:`SpendTracker.record` adds what the call used. Money comes from the ``prices`` table, looked
up by the model's name (``provider/model``, then ``model``); a money budget over a model without a
price refuses the call (:class:`PriceMissing`) rather than letting it run unmetered, and the config
check names the missing price at load.

Day and cron-entry totals start over at midnight in ``day_timezone``. The tracker keeps no durable
state: at start, :meth:`SpendTracker.restore` rebuilds the totals from the audit ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from orchestrator.llm.types import Usage
from orchestrator.proactive.config import Budget, Price, SpendBudgets, check_timezone
from orchestrator.proactive.prices import PriceMissing, find_price, price_keys, price_of
from orchestrator.proactive.spend import BudgetAxis, BudgetHit, ScopeName, Scopes, Spend, SpendRow
from orchestrator.proactive.totals import Total, Totals

logger = logging.getLogger("nexo.proactive")

_AXES: dict[tuple[ScopeName, str], BudgetAxis] = {
    ("goal", "tokens"): "goal_tokens",
    ("goal", "usd"): "goal_usd",
    ("day", "tokens"): "day_tokens",
    ("day", "usd"): "day_usd",
    ("heartbeat", "tokens"): "heartbeat_tokens",
    ("heartbeat", "usd"): "heartbeat_usd",
    ("cron_entry", "tokens"): "cron_entry_tokens",
    ("cron_entry", "usd"): "cron_entry_usd",
}
_SETTING: dict[ScopeName, str] = {
    "goal": "per_goal",
    "day": "per_day",
    "heartbeat": "per_heartbeat",
    "cron_entry": "per_cron_entry",
}


class SpendTracker:
    """Checks spend against :class:`SpendBudgets` before each model call and adds it up after."""

    def __init__(
        self,
        budgets: SpendBudgets,
        prices: Mapping[str, Price],
        *,
        day_timezone: str,
        clock: Callable[[], datetime],
    ) -> None:
        self.budgets = budgets
        self._prices = dict(prices)
        self._zone = ZoneInfo(check_timezone(day_timezone))
        self._clock = clock
        self._warned: set[str] = set()
        self._day = self._today()
        self._day_total = Total()
        self._goals = Totals("goal")
        self._heartbeats = Totals("heartbeat run")
        self._cron = Totals("cron entry")

    # -- clock and day -----------------------------------------------------------------------------

    def _local(self, moment: datetime) -> datetime:
        if moment.tzinfo is None:
            raise ValueError(
                f"{moment.isoformat()} has no time zone: pass aware datetimes, e.g. datetime.now(UTC)"
            )
        return moment.astimezone(self._zone)

    def _today(self) -> date:
        return self._local(self._clock()).date()

    def _roll(self) -> None:
        today = self._today()
        if today != self._day:
            self._day = today
            self._day_total = Total()
            self._cron.clear()

    def day_started_at(self) -> datetime:
        """The last midnight in ``day_timezone``, when today's day and cron-entry totals started."""
        self._roll()
        return datetime.combine(self._day, time(), tzinfo=self._zone)

    def day_resets_at(self) -> datetime:
        """The next midnight in ``day_timezone``, when the day and cron-entry totals start over."""
        self._roll()
        return datetime.combine(self._day + timedelta(days=1), time(), tzinfo=self._zone)

    # -- prices ------------------------------------------------------------------------------------

    def cost(
        self, model: str, usage: Usage, *, cache_read_tokens: int = 0, cache_write_tokens: int = 0
    ) -> float | None:
        """USD for one call of ``model``; None when the price table has no entry for it."""
        price = find_price(self._prices, model)
        if price is None:
            return None
        return price_of(
            price, usage, cache_read_tokens=cache_read_tokens, cache_write_tokens=cache_write_tokens
        )

    def _spend(self, model: str, usage: Usage, cache_read_tokens: int, cache_write_tokens: int) -> Spend:
        usd = self.cost(
            model, usage, cache_read_tokens=cache_read_tokens, cache_write_tokens=cache_write_tokens
        )
        if usd is None and model not in self._warned:
            self._warned.add(model)
            logger.warning(
                "no price for model %r: its spend is counted in tokens only; add autonomy.prices[%s]",
                model,
                " or ".join(repr(key) for key in price_keys(model)),
            )
        return Spend(usage.input_tokens + cache_read_tokens + cache_write_tokens, usage.output_tokens, usd)

    # -- checking and recording --------------------------------------------------------------------

    def _scopes(self, scopes: Scopes) -> list[tuple[ScopeName, str, Total, Budget]]:
        found: list[tuple[ScopeName, str, Total, Budget]] = [
            ("goal", scopes.goal, self._goals.get(scopes.goal), self.budgets.per_goal),
            ("day", self._day.isoformat(), self._day_total, self.budgets.per_day),
        ]
        if scopes.heartbeat is not None:
            found.append(
                (
                    "heartbeat",
                    scopes.heartbeat,
                    self._heartbeats.get(scopes.heartbeat),
                    self.budgets.per_heartbeat,
                )
            )
        if scopes.cron_entry is not None:
            found.append(
                (
                    "cron_entry",
                    scopes.cron_entry,
                    self._cron.get(scopes.cron_entry),
                    self.budgets.per_cron_entry,
                )
            )
        return found

    def check(self, scopes: Scopes, model: str, *, next_call: Usage | None = None) -> BudgetHit | None:
        """None when a call of ``model`` may go ahead; the first exhausted budget otherwise.

        ``next_call`` bounds what the call can cost: a budget that cannot take it on top of what was
        spent is reported as exhausted, so the spend stays within the budget.
        Raises :class:`PriceMissing` when a money budget applies and ``model`` (or a model already
        counted in that scope) has no price.
        """
        self._roll()
        reserve_tokens = next_call.total if next_call is not None else 0
        reserve_usd = (self.cost(model, next_call) or 0.0) if next_call is not None else 0.0
        for scope, key, total, budget in self._scopes(scopes):
            setting = _SETTING[scope]
            if budget.tokens is not None and (
                total.tokens >= budget.tokens or total.tokens + reserve_tokens > budget.tokens
            ):
                return self._hit(scope, key, "tokens", total.tokens, budget.tokens)
            if budget.usd is None:
                continue
            if find_price(self._prices, model) is None:
                raise PriceMissing(model, setting)
            if total.unpriced:
                raise PriceMissing(sorted(total.unpriced)[0], setting)
            if total.usd >= budget.usd or total.usd + reserve_usd > budget.usd:
                return self._hit(scope, key, "usd", total.usd, budget.usd)
        return None

    def _hit(
        self, scope: ScopeName, key: str, unit: Literal["tokens", "usd"], spent: float, limit: float
    ) -> BudgetHit:
        amount = (
            f"${spent:,.2f} of ${limit:,.2f}" if unit == "usd" else f"{spent:,.0f} of {limit:,.0f} tokens"
        )
        setting = f"autonomy.budgets.{_SETTING[scope]}.{unit}"
        resets_at: datetime | None = None
        if scope in ("day", "cron_entry"):
            resets_at = self.day_resets_at()
            when = f"it starts over at midnight {self._zone.key}"
            what = "today's spend" if scope == "day" else f"cron entry {key!r} has spent today"
            reason = f"{what}: {amount}; {when}, or raise {setting}"
        else:
            what = "goal" if scope == "goal" else "heartbeat run"
            reason = f"{what} {key!r} has spent its budget: {amount}; raise {setting} to allow more"
        return BudgetHit(_AXES[scope, unit], spent, limit, reason, resets_at)

    def record(
        self,
        scopes: Scopes,
        model: str,
        usage: Usage,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Spend:
        """Add one finished call to every scope it belongs to; returns what it cost."""
        self._roll()
        spend = self._spend(model, usage, cache_read_tokens, cache_write_tokens)
        self._add(scopes, spend, model, today=True)
        return spend

    def _add(self, scopes: Scopes, spend: Spend, model: str, *, today: bool) -> None:
        self._goals.add(scopes.goal, spend, model)
        if scopes.heartbeat is not None:
            self._heartbeats.add(scopes.heartbeat, spend, model)
        if today:
            self._day_total.add(spend, model)
            if scopes.cron_entry is not None:
                self._cron.add(scopes.cron_entry, spend, model)

    def finish(self, *, goal: str | None = None, heartbeat: str | None = None) -> None:
        """Forget the totals of a goal or heartbeat run that has ended."""
        if goal is not None:
            self._goals.pop(goal)
        if heartbeat is not None:
            self._heartbeats.pop(heartbeat)

    # -- reading -----------------------------------------------------------------------------------

    def day_spent(self) -> Spend:
        self._roll()
        return self._day_total.spend()

    def spent(self, scope: Literal["goal", "heartbeat", "cron_entry"], key: str) -> Spend:
        """What one goal, heartbeat run or cron entry (today) has spent so far."""
        self._roll()
        totals = {"goal": self._goals, "heartbeat": self._heartbeats, "cron_entry": self._cron}[scope]
        return totals.get(key).spend()

    def restore(self, rows: Iterable[SpendRow]) -> None:
        """Replace all totals with those of ``rows`` (call at start, before any record).

        Every row counts toward its goal and heartbeat run; only today's rows count toward the day and
        their cron entries. Rows are priced with the current price table.
        """
        self._day = self._today()
        self._day_total = Total()
        self._goals.clear()
        self._heartbeats.clear()
        self._cron.clear()
        for row in rows:
            usage = Usage(input_tokens=row.input_tokens, output_tokens=row.output_tokens)
            spend = self._spend(row.model, usage, row.cache_read_tokens, row.cache_write_tokens)
            scopes = Scopes(row.goal, row.heartbeat, row.cron_entry)
            self._add(scopes, spend, row.model, today=self._local(row.at).date() == self._day)
