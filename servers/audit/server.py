"""MCP tools of the audit server. Read-only: models can read the trail, never write or edit it.

Writes (appends, goal changes, retention) are control-plane requests, see ``control.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from servers.audit.control import AuditExtension
from servers.audit.errors import InvalidRequest
from servers.audit.settings import AuditSettings
from servers.audit.state import AuditState, open_state
from servers.audit.store import Clock, utc_now
from shared.hosting.capabilities import advertise_experimental
from shared.hosting.main import server_main
from shared.protocol.audit.digest import canonical_json
from shared.protocol.audit.entries import Entry
from shared.protocol.audit.terms import AUDIT_EXTENSION, ENTRY_KINDS
from shared.protocol.policy import READ_ONLY_HINTS, classification_meta
from shared.protocol.storage import StorageExtension
from shared.serverkit import NexoServer

MAX_TURNS = 200
MAX_HITS = 100
CELL_MAX = 160
BODY_PREVIEW = 400


class SearchHit(BaseModel):
    seq: int
    at: str
    kind: str
    source: str
    agent: str
    goal_id: str | None
    subject: str
    body: str
    """The entry's JSON body, shortened to a preview."""


class SearchResult(BaseModel):
    hits: list[SearchHit]
    """Newest first."""


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= CELL_MAX else flat[: CELL_MAX - 1] + "…"


def render_turns(goal_id: str, turns: list[Entry]) -> str:
    if not turns:
        return f"Goal {goal_id} has no recorded turns yet."
    lines = [
        f"Last {len(turns)} turns of goal {goal_id}:",
        "",
        "| # | time (UTC) | outcome | decision / summary | source |",
        "|---|---|---|---|---|",
    ]
    for entry in turns:
        body = entry.body
        time = entry.at[:19].replace("T", " ")
        decision = _cell(str(body.get("decision", "")) or entry.subject or "-")
        lines.append(
            f"| {body.get('index')} | {time} | {body.get('outcome')} | {decision} | {entry.source} |"
        )
    return "\n".join(lines)


def _hit(entry: Entry) -> SearchHit:
    body = canonical_json(entry.body)
    if len(body) > BODY_PREVIEW:
        body = body[: BODY_PREVIEW - 1] + "…"
    return SearchHit(
        seq=entry.seq,
        at=entry.at,
        kind=entry.kind,
        source=entry.source,
        agent=entry.agent,
        goal_id=entry.goal_id,
        subject=entry.subject,
        body=body,
    )


def build_server(settings: AuditSettings, *, clock: Clock = utc_now) -> MCPServer[AuditState]:
    @asynccontextmanager
    async def lifespan(_: MCPServer[AuditState]) -> AsyncIterator[AuditState]:
        async with open_state(settings, clock=clock) as state:
            yield state

    extension = AuditExtension()
    server: MCPServer[AuditState] = NexoServer(
        "audit",
        instructions=(
            "The append-only audit ledger of everything the agent did (turns, tool calls, approvals, "
            "channel traffic, cron fires) and the goal registry. Read it with agent_turns_tail and "
            "audit_search; nothing here can change it."
        ),
        lifespan=lifespan,
        extensions=[extension, StorageExtension(lambda state: [state.ledger.db.storage])],
    )
    advertise_experimental(server, {AUDIT_EXTENSION: extension.settings()})

    @server.tool(
        title="Latest turns of a goal",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", private_data=True),
    )
    async def agent_turns_tail(
        goal_id: Annotated[
            str, Field(description="The goal's id, from your goal context or audit_search(kind='goal').")
        ],
        n: Annotated[
            int, Field(description="How many of the latest turns to show.", ge=1, le=MAX_TURNS)
        ] = 20,
        *,
        ctx: Context[AuditState],
    ) -> str:
        """The last n turns of a goal as a markdown table: index, time, outcome, decision, source."""
        state = ctx.request_context.lifespan_context
        if not await state.ledger.knows_goal(goal_id):
            raise ToolError(
                f"no goal {goal_id!r} is known to the audit ledger. Use the goal id from your goal "
                "context, or find one with audit_search(query=..., kind='goal')."
            )
        turns = await state.ledger.tail(goal_id=goal_id, kind="turn", limit=n)
        return render_turns(goal_id, turns)

    @server.tool(
        title="Search the audit ledger",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", private_data=True),
    )
    async def audit_search(
        query: Annotated[
            str,
            Field(
                description="Words that must all occur in an entry's subject or body.", examples=["reindex"]
            ),
        ],
        kind: Annotated[
            str | None,
            Field(
                description="Only entries of this kind; omit for every kind.",
                json_schema_extra={"enum": [*ENTRY_KINDS, None]},
            ),
        ] = None,
        source: Annotated[
            str | None,
            Field(
                description="Only entries from this source; omit for every source.",
                examples=["channel:console"],
            ),
        ] = None,
        goal_id: Annotated[
            str | None, Field(description="Only entries of this goal; omit for every goal.")
        ] = None,
        limit: Annotated[int, Field(description="The most entries to return.", ge=1, le=MAX_HITS)] = 20,
        *,
        ctx: Context[AuditState],
    ) -> SearchResult:
        """Search the audit ledger's subjects and bodies for entries containing every word of query.

        Optionally only one kind (turn, tool_call, approval_requested, approval_answered, pairing,
        channel, cron_fire, memory_promotion, config_change, goal, notice, checkpoint), one source
        (e.g. channel:console, cron) or one goal. Newest first.
        """
        state = ctx.request_context.lifespan_context
        if kind is not None and kind not in ENTRY_KINDS:
            raise ToolError(f"unknown kind {kind!r}: use one of {', '.join(ENTRY_KINDS)}, or omit it")
        try:
            entries = await state.ledger.search(query, kind=kind, source=source, goal_id=goal_id, limit=limit)
        except InvalidRequest as exc:
            raise ToolError(str(exc)) from exc
        return SearchResult(hits=[_hit(entry) for entry in entries])

    return server


def main() -> int:
    def build() -> MCPServer[Any]:
        return build_server(AuditSettings())

    return server_main("servers.audit", build)
