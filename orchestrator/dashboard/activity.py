"""Activity: the ledger as a live feed, filterable, with what happened while the operator was away."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.feed import FeedFilter, LedgerFollower, entry_html
from orchestrator.dashboard.goals import goal_status
from orchestrator.dashboard.layout import empty, page, problem
from orchestrator.dashboard.markup import Markup, join, render
from shared.protocol.audit.terms import ENTRY_KINDS

SHOWN = 100
SEEN_COOKIE = "nexo_seen"
AWAY_S = 15 * 60.0
"""After this long without opening the page, it starts with what happened meanwhile."""
PING_S = 15.0
GOAL_CHANGES = frozenset({"goal", "turn", "checkpoint"})
"""Entries after which a goal's status, phase or budget may read differently."""


def _filters(wanted: FeedFilter) -> Markup:
    kinds = join(
        render(
            '<option value="{k}"{sel}>{k}</option>', k=k, sel=Markup(" selected" if k == wanted.kind else "")
        )
        for k in ("", *ENTRY_KINDS)
    )
    return render(
        '<form method="get" action="/" class="filters"><label>Agent <input name="agent" value="{agent}">'
        '</label><label>Channel <input name="channel" value="{channel}"></label>'
        '<label>Kind <select name="kind">{kinds}</select></label>'
        '<button type="submit">Filter</button></form>',
        agent=wanted.agent,
        channel=wanted.channel,
        kinds=kinds,
    )


def _seen(request: Request) -> tuple[int, float] | None:
    raw = request.cookies.get(SEEN_COOKIE, "")
    seq, _, at = raw.partition(":")
    try:
        return int(seq), float(at)
    except ValueError:
        return None


async def _away(daemon: Daemon, request: Request, head: int) -> Markup:
    seen = _seen(request)
    if seen is None or time.time() - seen[1] < AWAY_S or head <= seen[0]:
        return Markup("")
    missed = await daemon.tail(since_seq=seen[0], limit=1000)
    counts = Counter(str(entry["kind"]) for entry in missed)
    items = join(render("<li>{n} × {kind}</li>", n=n, kind=kind) for kind, n in counts.most_common())
    return render(
        '<section class="away" aria-label="While you were away"><h2>While you were away</h2>'
        "<ul>{items}</ul></section>",
        items=items,
    )


async def activity(request: Request) -> Response:
    daemon: Daemon = request.app.state.daemon
    wanted = FeedFilter.of(request.query_params)
    try:
        newest = await daemon.tail(limit=SHOWN, **({"kind": wanted.kind} if wanted.kind else {}))
        head = int(newest[-1]["seq"]) if newest else 0
        if wanted.kind:
            head = max(head, int((await daemon.tail(limit=1) or [{"seq": 0}])[-1]["seq"]))
        away = await _away(daemon, request, head)
    except DaemonError as exc:
        return problem(request, "Activity", str(exc))
    shown = [entry for entry in reversed(newest) if wanted.matches(entry)]
    stream = "/feed/stream?" + urlencode({**wanted.query(), "after": head})
    body = render(
        '{away}{filters}<p class="hint">Newest first; new entries appear as they are written '
        '(reload the page without JavaScript).</p>{empty}<ol id="feed" class="feed" data-stream="{stream}" '
        'aria-live="polite">{entries}</ol>',
        away=away,
        filters=_filters(wanted),
        stream=stream,
        entries=join(entry_html(entry) for entry in shown),
        empty=empty("Nothing recorded yet: talk to the agent with `nexo chat` and its turns show up here.")
        if not shown
        else Markup(""),
    )
    response = page(request, "Activity", body)
    response.set_cookie(
        SEEN_COOKIE,
        f"{head}:{time.time():.0f}",
        max_age=30 * 86400,
        httponly=True,
        samesite="strict",
        secure=request.app.state.secure_cookie,
    )
    return response


async def _goal_header(request: Request, goal_id: str) -> str | None:
    """The goal page's header as it is now; None while the daemon cannot say (the next change retries)."""
    daemon: Daemon = request.app.state.daemon
    try:
        found = (await daemon.request(daemon.audit_server, "nexo/audit/goals/get", id=goal_id))["goal"]
    except DaemonError:
        return None
    return goal_status(request, found).replace("\n", " ")


def _cursor(request: Request) -> int | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    try:
        return max(0, int(raw)) if raw is not None else None
    except ValueError:
        return None


async def stream(request: Request) -> Response:
    """SSE of entries after ``Last-Event-ID`` (after a reconnect) or ``after`` (the page's newest)."""
    follower: LedgerFollower = request.app.state.follower
    wanted = FeedFilter.of(request.query_params)
    try:
        cursor = _cursor(request)
        start = cursor if cursor is not None else await follower.head()
    except DaemonError as exc:
        return Response(str(exc), status_code=503, media_type="text/plain")

    async def events() -> AsyncIterator[ServerSentEvent]:
        entry: dict[str, Any]
        async for entry in follower.follow(start, wanted):
            yield ServerSentEvent(
                data=entry_html(entry).replace("\n", " "), id=str(entry["seq"]), event="entry"
            )
            if wanted.goal and entry.get("kind") in GOAL_CHANGES:
                header = await _goal_header(request, wanted.goal)
                if header is not None:
                    yield ServerSentEvent(data=header, event="goal")

    return EventSourceResponse(events(), ping=int(PING_S), send_timeout=10)
