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
from orchestrator.dashboard.markup import join, render

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
        "<tbody>{budgets}</tbody></table></div>",
        budgets=budget_rows,
        inp=day_spent.get("input_tokens", 0),
        out=day_spent.get("output_tokens", 0),
        usd=f"{float(day_spent.get('usd', 0.0)):.4f}",
        reset=autonomy.get("day_resets_at", "-"),
        state=f"paused by {autonomy.get('paused_by')}" if paused else "running",
        switch=switch,
    )
    return page(request, "Spend", render("{head}{body}", head=head, body=body))
