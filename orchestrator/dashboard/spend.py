"""Spend: tokens and money per day, per agent and per goal, from the goals' recorded budgets, and
the kill switch."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.charts import bars
from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.layout import button_form, empty, page, problem
from orchestrator.dashboard.markup import Markup, join, render
from orchestrator.dashboard.spend_history import DaySpend, unattended_days

DAYS = 14
GOALS_READ = 1000
TOP_GOALS = 10


def _spent(goal: dict[str, Any]) -> tuple[float, float]:
    budget = goal.get("budget") or {}
    return float(budget.get("tokens", 0)), float(budget.get("cost_usd", 0.0))


def _share(tokens: float, limit: object) -> str:
    """What part of its agent's per-goal token budget a goal used."""
    if not isinstance(limit, int) or limit <= 0:
        return "-"
    return f"{tokens / limit:.0%} of {limit:,}"


async def spend(request: Request) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        listed = await daemon.request(
            daemon.audit_server, "nexo/audit/goals/list", active_only=False, limit=GOALS_READ
        )
        status = await daemon.status()
        unattended = await unattended_days(daemon, DAYS, datetime.now(UTC))
    except DaemonError as exc:
        return problem(request, "Spend", str(exc))
    goals: list[dict[str, Any]] = listed["goals"]
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=n)).isoformat() for n in reversed(range(DAYS))]
    tokens, usd = dict.fromkeys(days, 0.0), dict.fromkeys(days, 0.0)
    agents: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for goal in goals:
        spent_tokens, spent_usd = _spent(goal)
        day = str(goal.get("created_at") or "")[:10]
        if day in tokens:
            tokens[day] += spent_tokens
            usd[day] += spent_usd
        agents[str(goal["agent"])][0] += spent_tokens
        agents[str(goal["agent"])][1] += spent_usd
    autonomy = status.get("autonomy") or {}
    day_spent = autonomy.get("day") or {}
    paused = not autonomy.get("enabled", True)
    limits = daemon.budgets.get("autonomy", {})
    per_goal = daemon.budgets.get("per_goal_tokens", {})
    top = sorted(goals, key=lambda goal: (_spent(goal)[1], _spent(goal)[0]), reverse=True)[:TOP_GOALS]
    if not goals:
        body = empty("Nothing spent yet: goals record their tokens and cost here as they run.")
    else:
        body = render(
            '{tokens}{usd}<h2>Per agent</h2><div class="scroll"><table><thead><tr><th>Agent</th>'
            "<th>Tokens</th><th>Cost</th></tr></thead><tbody>{agents}</tbody></table></div>"
            '<h2>Costliest goals</h2><div class="scroll"><table><thead><tr><th>Goal</th><th>Agent</th>'
            "<th>Status</th><th>Tokens</th><th>Of its budget</th><th>Cost</th></tr></thead>"
            "<tbody>{top}</tbody></table></div>",
            tokens=bars(
                f"Tokens per day (last {DAYS} days, UTC)", [(d[5:], tokens[d]) for d in days], "tokens"
            ),
            usd=bars(
                f"Cost per day (last {DAYS} days, UTC)", [(d[5:], round(usd[d], 4)) for d in days], "USD"
            ),
            agents=join(
                render("<tr><td>{a}</td><td>{t}</td><td>${c}</td></tr>", a=a, t=f"{t:g}", c=f"{c:.4f}")
                for a, (t, c) in sorted(agents.items())
            ),
            top=join(
                render(
                    '<tr><td><a href="/goals/{id}">{id}</a></td><td>{agent}</td><td>{status}</td>'
                    "<td>{t}</td><td>{share}</td><td>${c}</td></tr>",
                    share=_share(_spent(goal)[0], per_goal.get(goal["agent"])),
                    id=goal["id"],
                    agent=goal["agent"],
                    status=goal["status"],
                    t=f"{_spent(goal)[0]:g}",
                    c=f"{_spent(goal)[1]:.4f}",
                )
                for goal in top
            ),
        )
    switch = (
        button_form(request, "/autonomy", "Resume autonomy", switch="resume")
        if paused
        else button_form(request, "/autonomy", "Pause autonomy (kill switch)", danger=True, switch="pause")
    )
    budget_rows = join(
        render(
            "<tr><td>{name}</td><td>{tokens}</td><td>{usd}</td></tr>",
            name=name,
            tokens="no limit" if limit.get("tokens") is None else f"{limit['tokens']:,} tokens",
            usd="no limit" if limit.get("usd") is None else f"${limit['usd']:g}",
        )
        for name, limit in limits.items()
    )
    head = render(
        "<p>Unattended work today: {inp} input and {out} output tokens, ${usd} (the day resets at {reset})."
        " Autonomy is {state}.</p>{switch}<h2>Autonomy budgets</h2>"
        '<div class="scroll"><table><thead><tr><th>Budget</th><th>Tokens</th><th>Money</th></tr></thead>'
        "<tbody>{budgets}</tbody></table></div>{history}",
        budgets=budget_rows,
        inp=day_spent.get("input_tokens", 0),
        out=day_spent.get("output_tokens", 0),
        usd=f"{float(day_spent.get('usd', 0.0)):.4f}",
        reset=autonomy.get("day_resets_at", "-"),
        state=f"paused by {autonomy.get('paused_by')}" if paused else "running",
        switch=switch,
        history=unattended_history(unattended, limits.get("per_day") or {}),
    )
    return page(request, "Spend", render("{head}{body}", head=head, body=body))


def _of_budget(spent: float, limit: object, shown: str) -> str:
    if not isinstance(limit, int | float) or limit <= 0:
        return "-"
    return f"{spent / limit:.0%} of {shown}"


def unattended_history(days: list[DaySpend], budget: dict[str, Any]) -> Markup:
    """Unattended tokens and cost per day (the budget's days), each against ``autonomy.budgets.per_day``."""
    tokens, usd = budget.get("tokens"), budget.get("usd")
    rows = join(
        render(
            "<tr{over}><td>{day}</td><td>{t}</td><td>{tshare}</td><td>${c}{unpriced}</td>"
            "<td>{ushare}</td></tr>",
            over=Markup(' class="warning"')
            if (isinstance(tokens, int) and d.tokens > tokens)
            or (isinstance(usd, int | float) and d.usd > usd)
            else Markup(""),
            day=d.day.isoformat(),
            t=f"{d.tokens:,}",
            tshare=_of_budget(d.tokens, tokens, f"{tokens:,}" if isinstance(tokens, int) else ""),
            c=f"{d.usd:.4f}",
            unpriced="" if d.priced else " (a model without a price in autonomy.prices)",
            ushare=_of_budget(d.usd, usd, f"${usd:g}" if isinstance(usd, int | float) else ""),
        )
        for d in reversed(days)
    )
    return render(
        "<h2>Unattended spend per day</h2>{chart}<p>Heartbeats, proactive ticks and cron fires, read from "
        "the ledger's turn and spend_reserved entries, against <code>autonomy.budgets.per_day</code>."
        '</p><div class="scroll"><table><thead><tr><th>Day</th><th>Tokens</th><th>Of the day\'s tokens</th>'
        "<th>Cost</th><th>Of the day's money</th></tr></thead><tbody>{rows}</tbody></table></div>",
        chart=bars(
            f"Unattended tokens per day (last {len(days)} days)",
            [(d.day.isoformat()[5:], float(d.tokens)) for d in days],
            "tokens",
        ),
        rows=rows,
    )
