"""Schedules: cron entries with their next fire and last outcome; pause, resume, drop; recent fires."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.feed import entry_html
from orchestrator.dashboard.forms import checked_form, field
from orchestrator.dashboard.layout import button_form, empty, page, problem, when
from orchestrator.dashboard.markup import Markup, join, render

ACTIONS = {"pause": "nexo/cron/pause", "resume": "nexo/cron/resume", "drop": "nexo/cron/drop"}
FIRES_SHOWN = 20


def _row(request: Request, entry: dict[str, Any]) -> Markup:
    entry_id = str(entry["id"])
    toggle = "resume" if entry["state"] == "paused" else "pause"
    return render(
        '<tr id="cron-{id}"><td><code>{id}</code></td><td>{agent}</td><td>{kind}</td><td>{schedule}</td>'
        '<td class="state-{state}">{state}</td><td>{next}</td><td>{last}</td><td class="prompt">{text}</td>'
        "<td>{toggle}{drop}</td></tr>",
        id=entry_id,
        agent=entry["agent"],
        kind=entry["kind"],
        schedule=f"{entry['schedule']} ({entry['timezone']})",
        state=entry["state"],
        next=when(entry.get("next_due")),
        last=entry.get("last_fire") or "-",
        text=str(entry.get("text") or "")[:200],
        toggle=button_form(
            request, "/schedules/change", toggle.capitalize(), entry_id=entry_id, action=toggle
        )
        if entry["state"] in ("active", "paused")
        else Markup(""),
        drop=button_form(request, "/schedules/change", "Drop", danger=True, entry_id=entry_id, action="drop"),
    )


async def schedules(request: Request, flash: str | None = None, status: int = 200) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        entries = (await daemon.request(daemon.cron_server, "nexo/cron/list"))["entries"]
        fires = await daemon.tail(kind="cron_fire", limit=FIRES_SHOWN)
    except DaemonError as exc:
        return problem(request, "Schedules", str(exc))
    table = (
        render(
            '<div class="scroll"><table><thead><tr><th>Entry</th><th>Agent</th><th>Kind</th><th>Schedule</th>'
            "<th>State</th><th>Next fire</th><th>Last fire</th><th>Text</th><th></th></tr></thead>"
            "<tbody>{rows}</tbody></table></div>",
            rows=join(_row(request, entry) for entry in entries),
        )
        if entries
        else empty(
            "No schedules. Ask the agent for a reminder, or run `nexo cron list` to check the cron server."
        )
    )
    recent = (
        render('<ol class="feed">{items}</ol>', items=join(entry_html(e) for e in reversed(fires)))
        if fires
        else empty("No fires recorded yet.")
    )
    body = render("{table}<h2>Recent fires</h2>{recent}", table=table, recent=recent)
    return page(request, "Schedules", body, flash=flash, status=status)


async def change(request: Request) -> Response:
    form = await checked_form(request)
    entry_id, action = field(form, "entry_id"), field(form, "action")
    method = ACTIONS.get(action)
    if method is None:
        return await schedules(request, flash=f"Refused: unknown action {action!r}", status=400)
    daemon: Daemon = request.app.state.daemon
    try:
        await daemon.request(daemon.cron_server, method, id=entry_id)
    except DaemonError as exc:
        return await schedules(request, flash=f"Refused: {exc}", status=409)
    done = {"pause": "Paused", "resume": "Resumed", "drop": "Dropped"}[action]
    return await schedules(request, flash=f"{done} {entry_id}.")
