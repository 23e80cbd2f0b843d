"""MCP tools of the cron server: schedule prompts and reminders, list, pause, resume, delete them.

Which binding and agent a call acts for, and the model an entry's turns run with, come from the
request's ``_meta`` (``nexo/binding``, ``nexo/agent``, ``nexo/model``), set by the orchestrator,
never from arguments a model chooses. A client that sends none works on the ``default`` binding.
Fires leave as durable events (``nexo/events/pull``); the rest of the control plane is in
``control.py``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, overload

import mcp_types as types
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from servers.cron.control import CronExtension, extension_settings
from servers.cron.errors import CronError
from servers.cron.scheduler import Seam, Wait, no_seam, sleep_or_wake
from servers.cron.settings import CronSettings
from servers.cron.state import Caller, CronState, open_state
from servers.cron.store import Clock, utc_now
from shared.hosting.capabilities import advertise_experimental
from shared.hosting.main import server_main
from shared.protocol.cron import (
    BINDING_META_KEY,
    BINDING_PATTERN,
    CRON_EXTENSION,
    DEFAULT_AGENT,
    DEFAULT_BINDING,
    EVENT_KINDS,
    MISFIRE_POLICIES,
    MODEL_META_KEY,
    MODEL_PATTERN,
    Entry,
)
from shared.protocol.events import EventsExtension, experimental_events_capability
from shared.protocol.memory.meta import AGENT_META_KEY, AGENT_PATTERN
from shared.protocol.policy import READ_ONLY_HINTS, classification_meta, tool_hints
from shared.protocol.storage import StorageExtension
from shared.serverkit import NexoServer

SERVER_NAME = "cron"
PREVIEW = 120
WRITE = tool_hints()
STATE_CHANGE = tool_hints(idempotent=True)
DELETE = tool_hints(destructive=True, idempotent=True)
OUTBOUND = tool_hints(open_world=True)
INSTRUCTIONS = (
    "Schedules for this agent. cron_create runs a prompt on a schedule ('*/30 * * * *', "
    "'cron 0 9 * * mon-fri', 'every 2h', 'once_after 20m', 'once_at 09:00'); reminder sends a text "
    "as is at one time; cron_list shows what is scheduled, when it fires next and how it last went. "
    "Runs missed while the agent was down are parked by default: cron_resume continues them."
)
CREATE_DESCRIPTION = (
    "Run a prompt as a turn of this agent on a schedule; the answer goes to channel/recipient. "
    "Returns the entry with its next fire time in UTC and in its timezone."
)


MisfireArg = Annotated[
    str | None,
    Field(
        description=(
            "What happens to runs missed while the agent was down: park (the default; waits for "
            "cron_resume), skip, catch_up_once (run the latest once) or all (run each, within a day)."
        ),
        json_schema_extra={"enum": list(MISFIRE_POLICIES)},
    ),
]
TimezoneArg = Annotated[
    str | None,
    Field(
        description="An IANA time-zone name for wall-clock times in the schedule; omit for the server's.",
        examples=["Europe/Madrid"],
    ),
]
EntryIdArg = Annotated[str, Field(description="The entry's id, as cron_list shows it.")]
ChannelArg = Annotated[
    str | None,
    Field(
        description="The channel server the answer goes to; omit for the agent's usual place.",
        examples=["console"],
    ),
]
RecipientArg = Annotated[
    str | None,
    Field(description="The chat or user on that channel (its chat_id); omit for the channel's default."),
]


class EntryView(BaseModel):
    """One entry as a model sees it."""

    id: str
    kind: str
    """prompt (a turn with the prompt), reminder (the text is sent as is) or agent_turn (a poller)."""
    schedule: str
    timezone: str
    recurring: bool
    preview: str
    """The prompt or reminder text, shortened."""
    channel: str | None
    recipient: str | None
    state: str
    """active, paused, parked (missed runs while down: resume it), done, failed or expired."""
    misfire: str
    next_fire_utc: str | None
    next_fire_local: str | None
    """The next fire in the entry's timezone."""
    last_fire: str | None
    """How the newest fire went: pending, delivered, done, failed, skipped, missed, skipped_overlap
    or retrying."""


class EntryList(BaseModel):
    entries: list[EntryView]
    limit: int
    """Entries this binding may hold at once."""


class Deleted(BaseModel):
    id: str
    deleted: bool


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


def view(entry: Entry) -> EntryView:
    return EntryView(
        id=entry.id,
        kind=entry.kind,
        schedule=entry.schedule,
        timezone=entry.timezone,
        recurring=entry.recurring,
        preview=_preview(entry.text),
        channel=entry.channel,
        recipient=entry.recipient,
        state=entry.state,
        misfire=entry.misfire,
        next_fire_utc=entry.next_due,
        next_fire_local=entry.next_due_local,
        last_fire=entry.last_fire,
    )


def caller(ctx: Context[CronState]) -> Caller:
    """Binding, agent and model from ``_meta``; defaults for clients that send none."""
    meta = ctx.request_context.meta or {}
    binding = _meta_text(meta, BINDING_META_KEY, DEFAULT_BINDING, BINDING_PATTERN, "a binding name")
    agent = _meta_text(meta, AGENT_META_KEY, DEFAULT_AGENT, AGENT_PATTERN, "an agent id")
    model = _meta_text(
        meta, MODEL_META_KEY, None, MODEL_PATTERN, "provider/model like 'anthropic/claude-sonnet-4-5'"
    )
    if model is None:
        return Caller(binding=binding, agent=agent)
    provider, _, name = model.partition("/")
    return Caller(binding=binding, agent=agent, provider=provider, model=name)


@overload
def _meta_text(meta: Mapping[str, Any], key: str, default: str, pattern: str, expected: str) -> str: ...
@overload
def _meta_text(
    meta: Mapping[str, Any], key: str, default: None, pattern: str, expected: str
) -> str | None: ...
def _meta_text(
    meta: Mapping[str, Any], key: str, default: str | None, pattern: str, expected: str
) -> str | None:
    value = meta.get(key)
    if value is None:
        return default
    if isinstance(value, str) and re.fullmatch(pattern, value):
        return value
    raise MCPError(
        types.INVALID_PARAMS, f"_meta {key!r} is {value!r}; expected {expected} matching {pattern}"
    )


@contextmanager
def refusals_as_tool_errors() -> Iterator[None]:
    try:
        yield
    except CronError as exc:
        raise ToolError(str(exc)) from exc


def build_server(
    settings: CronSettings,
    *,
    clock: Clock = utc_now,
    wait: Wait = sleep_or_wake,
    monotonic: Callable[[], float] | None = None,
    seam: Seam = no_seam,
    run_scheduler: bool = True,
) -> MCPServer[CronState]:
    """The cron server; ``clock``, ``wait`` and ``seam`` let tests drive time and stop it anywhere."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[CronState]) -> AsyncIterator[CronState]:
        async with open_state(
            settings, clock=clock, wait=wait, monotonic=monotonic, seam=seam, run_scheduler=run_scheduler
        ) as state:
            yield state

    server: MCPServer[CronState] = NexoServer(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        extensions=[
            CronExtension(),
            EventsExtension(lambda state: state.events, kinds=EVENT_KINDS),
            StorageExtension(lambda state: [state.store.db.storage]),
        ],
    )
    advertise_experimental(
        server, {CRON_EXTENSION: extension_settings(), **experimental_events_capability(EVENT_KINDS)}
    )

    @server.tool(
        title="Schedule a prompt",
        annotations=WRITE,
        meta=classification_meta("write"),
        description=CREATE_DESCRIPTION,
    )
    async def cron_create(
        schedule: Annotated[
            str,
            Field(
                description=(
                    "When to run: a 5-field cron expression ('*/5 * * * *', 'cron 0 9 * * mon-fri', "
                    "'@daily'), an interval ('every 30m', 'every 1h30m') or one time ('once_after 2h', "
                    "'once_at 09:00', 'once_at 2026-12-01T09:00:00Z'); at least 60 s between runs."
                ),
                examples=["cron 0 9 * * mon-fri", "every 2h", "once_after 20m"],
            ),
        ],
        prompt: Annotated[str, Field(description="The prompt the agent runs as a turn at each fire.")],
        channel: ChannelArg = None,
        recipient: RecipientArg = None,
        recurring: Annotated[
            bool, Field(description="false runs a repeating schedule once, at its next time.")
        ] = True,
        misfire: MisfireArg = None,
        timezone: TimezoneArg = None,
        *,
        ctx: Context[CronState],
    ) -> EntryView:
        state = ctx.request_context.lifespan_context
        with refusals_as_tool_errors():
            entry = await state.create(
                caller(ctx),
                kind="prompt",
                schedule=schedule,
                text=prompt,
                channel=channel,
                recipient=recipient,
                recurring=recurring,
                misfire=misfire,
                timezone=timezone,
            )
            return view(await state.view(entry))

    @server.tool(
        title="List scheduled entries",
        annotations=READ_ONLY_HINTS,
        meta=classification_meta("read_only", private_data=True),
    )
    async def cron_list(*, ctx: Context[CronState]) -> EntryList:
        """This agent's scheduled entries, oldest first: id, schedule, timezone, prompt preview, next
        fire time, state (parked entries missed runs while the agent was down; cron_resume them),
        misfire policy and how the last fire went."""
        state = ctx.request_context.lifespan_context
        who = caller(ctx)
        entries = await state.entries(who.binding)
        return EntryList(entries=[view(entry) for entry in entries], limit=settings.max_entries_per_binding)

    @server.tool(title="Delete a scheduled entry", annotations=DELETE, meta=classification_meta("write"))
    async def cron_delete(id: EntryIdArg, *, ctx: Context[CronState]) -> Deleted:
        """Delete one of this agent's entries (id from cron_list); it never fires again."""
        state = ctx.request_context.lifespan_context
        with refusals_as_tool_errors():
            return Deleted(id=id, deleted=await state.drop(id, caller(ctx).binding, from_tool=True))

    @server.tool(title="Pause a scheduled entry", annotations=STATE_CHANGE, meta=classification_meta("write"))
    async def cron_pause(id: EntryIdArg, *, ctx: Context[CronState]) -> EntryView:
        """Pause one of this agent's entries (id from cron_list) until cron_resume."""
        state = ctx.request_context.lifespan_context
        with refusals_as_tool_errors():
            entry = await state.pause(id, caller(ctx).binding, from_tool=True)
            return view(await state.view(entry))

    @server.tool(
        title="Resume a scheduled entry", annotations=STATE_CHANGE, meta=classification_meta("write")
    )
    async def cron_resume(id: EntryIdArg, *, ctx: Context[CronState]) -> EntryView:
        """Resume a paused or parked entry (id from cron_list) from its next time after now. Runs
        missed while parked stay recorded as missed; a one-time entry whose time passed runs now."""
        state = ctx.request_context.lifespan_context
        with refusals_as_tool_errors():
            entry = await state.resume(id, caller(ctx).binding, from_tool=True)
            return view(await state.view(entry))

    @server.tool(title="Send a reminder later", annotations=OUTBOUND, meta=classification_meta("outbound"))
    async def reminder(
        when: Annotated[
            str,
            Field(
                description=(
                    "One time: 'once_after 2h', 'once_at 09:00' (the next 09:00 in timezone), "
                    "'once_at 2026-12-01 09:00' or 'once_at 2026-12-01T09:00:00Z'."
                ),
                examples=["once_after 2h", "once_at 09:00"],
            ),
        ],
        text: Annotated[str, Field(description="The message, sent exactly as written.")],
        channel: Annotated[str, Field(description="The channel server to send it on.", examples=["console"])],
        recipient: RecipientArg = None,
        timezone: TimezoneArg = None,
        *,
        ctx: Context[CronState],
    ) -> EntryView:
        """Send text, exactly as written, to channel (and recipient) at one time: 'once_after 2h',
        'once_at 09:00' (the next 09:00 in timezone), 'once_at 2026-12-01 09:00' or
        'once_at 2026-12-01T09:00:00Z'. No model turn runs: the text is the message."""
        state = ctx.request_context.lifespan_context
        with refusals_as_tool_errors():
            entry = await state.create(
                caller(ctx),
                kind="reminder",
                schedule=when,
                text=text,
                channel=channel,
                recipient=recipient,
                recurring=False,
                timezone=timezone,
                one_shot_only=True,
            )
            return view(await state.view(entry))

    return server


def main() -> int:
    def build() -> MCPServer[Any]:
        return build_server(CronSettings())

    return server_main("servers.cron", build)
