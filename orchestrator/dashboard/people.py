"""People: pairing requests waiting for a code's approval, paired contacts per channel, revoke."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.forms import checked_form, field
from orchestrator.dashboard.layout import button_form, empty, page, problem, session_of, when
from orchestrator.dashboard.markup import Markup, join, render


def _pending(request: Request, row: dict[str, Any]) -> Markup:
    pending_id = str(row["pending_id"])
    return render(
        '<li class="card" id="pending-{id}"><h2>{name}</h2><dl><dt>Channel</dt><dd>{channel}</dd>'
        "<dt>Sender</dt><dd><code>{sender}</code></dd><dt>Asked</dt><dd>{at}</dd><dt>Expires</dt>"
        '<dd>{expires}</dd></dl><div class="actions">{approve}{deny}</div></li>',
        id=pending_id,
        name=row.get("display_name") or row["sender"],
        channel=row["channel"],
        sender=row["sender"],
        at=when(row.get("created_at")),
        expires=when(row.get("expires_at")),
        approve=button_form(request, "/people/approve", "Approve", pending_id=pending_id),
        deny=button_form(request, "/people/deny", "Deny", danger=True, pending_id=pending_id),
    )


def _record(request: Request, row: dict[str, Any]) -> Markup:
    return render(
        "<tr><td>{channel}</td><td><code>{sender}</code></td><td>{name}</td><td>{role}</td><td>{at}</td>"
        "<td>{revoke}</td></tr>",
        channel=row["channel"],
        sender=row["sender"],
        name=row.get("display_name") or "",
        role=row["role"],
        at=when(row.get("paired_at")),
        revoke=button_form(
            request, "/people/revoke", "Revoke", danger=True, channel=row["channel"], sender=row["sender"]
        ),
    )


async def people(request: Request, flash: str | None = None, status: int = 200) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        listed = await daemon.request(daemon.pairing_server, "nexo/pairing/list")
    except DaemonError as exc:
        return problem(request, "People", str(exc))
    pending = (
        render('<ul class="cards">{cards}</ul>', cards=join(_pending(request, r) for r in listed["pending"]))
        if listed["pending"]
        else empty(
            "No pairing request is waiting. A new contact who messages a channel gets a code "
            "that shows up here."
        )
    )
    records = (
        render(
            '<div class="scroll"><table><thead><tr><th>Channel</th><th>Sender</th><th>Name</th><th>Role</th>'
            "<th>Paired</th><th></th></tr></thead><tbody>{rows}</tbody></table></div>",
            rows=join(_record(request, r) for r in listed["records"]),
        )
        if listed["records"]
        else empty("Nobody is paired yet: approve a request above, or run `nexo pair seed CHANNEL SENDER`.")
    )
    body = render(
        "<h2>Waiting for approval</h2>{pending}<h2>Paired contacts</h2>{records}",
        pending=pending,
        records=records,
    )
    return page(request, "People", body, flash=flash, status=status)


async def _changed(request: Request, method: str, params: dict[str, Any], done: str) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        await daemon.request(daemon.pairing_server, method, **params)
    except DaemonError as exc:
        return await people(request, flash=f"Refused: {exc}", status=409)
    return await people(request, flash=done)


def _by(request: Request) -> str:
    return f"dashboard:{session_of(request).operator}"[:128]


async def approve(request: Request) -> Response:
    pending_id = field(await checked_form(request), "pending_id")
    return await _changed(
        request, "nexo/pairing/approve", {"pending_id": pending_id, "by": _by(request)}, "Approved: paired."
    )


async def deny(request: Request) -> Response:
    pending_id = field(await checked_form(request), "pending_id")
    return await _changed(
        request, "nexo/pairing/deny", {"pending_id": pending_id, "by": _by(request)}, "Denied."
    )


async def revoke(request: Request) -> Response:
    form = await checked_form(request)
    channel, sender = field(form, "channel"), field(form, "sender")
    return await _changed(
        request,
        "nexo/pairing/revoke",
        {"channel": channel, "sender": sender},
        f"Revoked {sender} on {channel}.",
    )
