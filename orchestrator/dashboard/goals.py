"""Goals: running and recent goals, one goal's turn log and live progress, cancel."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.feed import entry_html
from orchestrator.dashboard.forms import checked_form
from orchestrator.dashboard.layout import button_form, empty, page, problem, when
from orchestrator.dashboard.markup import Markup, join, render
from shared.protocol.audit.terms import TERMINAL_STATUSES

RECENT = 50


def _budget(goal: dict[str, Any]) -> str:
    budget = goal.get("budget") or {}
    return (
        f"{budget.get('turns', 0)} turns, {budget.get('tokens', 0)} tokens, "
        f"${float(budget.get('cost_usd', 0.0)):.4f}, {float(budget.get('wall_s', 0.0)):.0f} s"
    )


def _row(goal: dict[str, Any]) -> Markup:
    return render(
        '<tr><td><a href="/goals/{id}">{id}</a></td><td>{agent}</td><td>{kind}</td>'
        '<td class="status-{status}">{status}</td><td>{phase}</td><td>{budget}</td><td>{at}</td>'
        '<td class="prompt">{prompt}</td></tr>',
        id=goal["id"],
        agent=goal["agent"],
        kind=goal["kind"],
        status=goal["status"],
        phase=goal.get("phase") or "-",
        budget=_budget(goal),
        at=when(goal.get("created_at")),
        prompt=str(goal.get("prompt") or "")[:200],
    )


async def goals(request: Request) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        listed = await daemon.request(
            daemon.audit_server, "nexo/audit/goals/list", active_only=False, limit=RECENT
        )
    except DaemonError as exc:
        return problem(request, "Goals", str(exc))
    rows = listed["goals"]
    if not rows:
        return page(request, "Goals", empty('No goals yet: start one with `nexo agent run --bg "..."`.'))
    body = render(
        '<p>{running} running of at most {max}.</p><div class="scroll"><table><thead><tr><th>Goal</th>'
        "<th>Agent</th><th>Kind</th><th>Status</th><th>Phase</th><th>Budget used</th><th>Created</th>"
        "<th>Prompt</th></tr></thead><tbody>{rows}</tbody></table></div>",
        running=listed["running"],
        max=listed["maxRunning"],
        rows=join(_row(goal) for goal in rows),
    )
    return page(request, "Goals", body)


def goal_status(request: Request, found: dict[str, Any]) -> Markup:
    """The header of a goal's page: what the live stream sends again whenever the goal changes."""
    goal_id = str(found["id"])
    live = found["status"] not in TERMINAL_STATUSES
    return render(
        '<section id="goal-status" aria-live="polite"><dl><dt>Agent</dt><dd>{agent}</dd><dt>Kind</dt>'
        '<dd>{kind}</dd><dt>Status</dt><dd class="status-{status}">{status}</dd><dt>Phase</dt>'
        "<dd>{phase}</dd><dt>Budget used</dt><dd>{budget}</dd><dt>Origin</dt><dd>{origin}</dd>"
        "<dt>Outcome</dt><dd>{outcome}</dd></dl>{cancel}</section>",
        agent=found["agent"],
        kind=found["kind"],
        status=found["status"],
        phase=found.get("phase") or "-",
        budget=_budget(found),
        origin=found.get("origin", {}).get("source"),
        outcome=found.get("outcome") or "-",
        cancel=button_form(request, f"/goals/{goal_id}/cancel", "Cancel this goal", danger=True)
        if live
        else Markup(""),
    )


async def goal(request: Request, flash: str | None = None, status: int = 200) -> Response:
    daemon: Daemon = request.app.state.daemon
    goal_id = request.path_params["goal_id"]
    try:
        found = (await daemon.request(daemon.audit_server, "nexo/audit/goals/get", id=goal_id))["goal"]
        log = await daemon.tail(goal_id=goal_id, limit=200)
    except DaemonError as exc:
        return problem(request, f"Goal {goal_id}", str(exc), status=404)
    live = found["status"] not in TERMINAL_STATUSES
    body = render(
        '{header}<h2>Prompt</h2><pre>{prompt}</pre><h2>Turn log</h2><ol class="feed" id="feed" '
        'data-stream="{stream}">{log}</ol>',
        header=goal_status(request, found),
        prompt=found.get("prompt"),
        stream=f"/feed/stream?goal={goal_id}&after={log[-1]['seq'] if log else 0}" if live else "",
        log=join(entry_html(entry) for entry in reversed(log)),
    )
    return page(request, f"Goal {goal_id}", body, flash=flash, status=status)


async def cancel(request: Request) -> Response:
    await checked_form(request)
    daemon: Daemon = request.app.state.daemon
    goal_id = request.path_params["goal_id"]
    try:
        await daemon.op({"op": "cancel", "goal": goal_id, "reason": "the dashboard"})
    except DaemonError as exc:
        return await goal(request, flash=f"Refused: {exc}", status=409)
    return await goal(request, flash=f"Cancelled goal {goal_id}.")
