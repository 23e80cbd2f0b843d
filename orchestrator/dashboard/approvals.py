"""Approvals: the prompts waiting for the operator, answered here as on any approving channel."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.forms import checked_form, field
from orchestrator.dashboard.layout import button_form, empty, page, problem, session_of, when
from orchestrator.dashboard.markup import Markup, join, render


def _arguments(preview: str) -> Markup:
    """The call's arguments one per line when the preview is a whole JSON object, else as sent."""
    try:
        parsed = json.loads(preview)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        return render('<pre class="preview">{preview}</pre>', preview=preview)
    rows = join(
        render(
            "<dt>{key}</dt><dd>{value}</dd>",
            key=key,
            value=value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
        )
        for key, value in parsed.items()
    )
    return render('<dl class="arguments">{rows}</dl>', rows=rows)


def _card(request: Request, row: dict[str, Any]) -> Markup:
    request_id = str(row["request_id"])
    asked_at = datetime.fromtimestamp(float(str(row["asked_at"])), UTC).isoformat()
    return render(
        '<li class="card approval" id="approval-{id}"><h2><code>{tool}</code></h2>'
        "<dl><dt>Asked by</dt><dd>{origin}</dd><dt>Agent</dt><dd>{agent}</dd>"
        "<dt>Shown on</dt><dd>{asked}</dd><dt>Asked</dt><dd>{at}</dd>"
        "<dt>Request</dt><dd><code>{id}</code></dd>"
        "</dl><p>{description}</p>{preview}"
        '<div class="actions">{approve}{deny}</div></li>',
        id=request_id,
        tool=row["tool"],
        origin=row.get("origin") or "the agent itself (no chat)",
        agent=row.get("agent"),
        asked=", ".join(str(a) for a in row.get("asked") or []) or "-",
        at=when(asked_at),
        description=row.get("description"),
        preview=_arguments(str(row.get("preview") or "")),
        approve=button_form(request, "/approvals/answer", "Approve", request_id=request_id, behavior="allow"),
        deny=button_form(
            request, "/approvals/answer", "Deny", danger=True, request_id=request_id, behavior="deny"
        ),
    )


async def approvals(request: Request, flash: str | None = None, status: int = 200) -> Response:
    daemon: Daemon = request.app.state.daemon
    try:
        rows = (await daemon.op({"op": "approvals"}))["approvals"]
    except DaemonError as exc:
        return problem(request, "Approvals", str(exc))
    body = (
        render('<ul class="cards">{cards}</ul>', cards=join(_card(request, row) for row in rows))
        if rows
        else empty("No tool call is waiting for approval. Prompts appear here as the agents ask.")
    )
    return page(request, "Approvals", body, flash=flash, status=status)


async def answer(request: Request) -> Response:
    form = await checked_form(request)
    request_id, behavior = field(form, "request_id"), field(form, "behavior")
    daemon: Daemon = request.app.state.daemon
    try:
        await daemon.op(
            {
                "op": "approve",
                "request_id": request_id,
                "behavior": behavior,
                "surface": "dashboard",
                "operator": session_of(request).operator,
            }
        )
    except DaemonError as exc:
        return await approvals(request, flash=f"Refused: {exc}", status=409)
    done = "Approved" if behavior == "allow" else "Denied"
    return await approvals(request, flash=f"{done}: request {request_id}.")
