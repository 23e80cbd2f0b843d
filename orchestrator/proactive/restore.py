"""Autonomy's counters rebuilt from the audit ledger at start: spend and the hourly action window.

The orchestrator keeps no durable state, so every limit that must hold across a restart is read back
from the entries that recorded it, bounded by time (the windows the limits count over), never by a
number of rows:

* spend: per goal, its newest ``turn`` or ``spend_reserved`` entry since the start of the budget day
  (a turn entry carries the goal's running total; a reservation written before a call that never
  got its turn entry, because the process died, carries the bound of that call);
* actions: the ``tool_call`` entries of unattended sources (heartbeat, proactive, ``cron:<entry>``)
  in the last hour, per agent.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from orchestrator.mesh import ServerConnection
from orchestrator.proactive.spend import SpendRow
from shared.protocol.audit.entries import Entry
from shared.protocol.audit.methods import TailParams, TailRequest, TailResult
from shared.protocol.audit.terms import MAX_TAIL, EntryKind

REQUEST_TIMEOUT_S = 30.0
UNATTENDED_SOURCES = ("heartbeat", "proactive", "wake")
CRON_SOURCE = "cron:"


def is_unattended(source: str) -> bool:
    """Whether entries of ``source`` come from a turn nobody was watching."""
    return source in UNATTENDED_SOURCES or source.startswith(CRON_SOURCE)


async def entries_since(audit: ServerConnection, kind: EntryKind, since: datetime) -> list[Entry]:
    """Every entry of ``kind`` written at or after ``since``, oldest first, a page at a time."""
    found: list[Entry] = []
    after: int | None = None
    while True:
        params = TailParams(kind=kind, since_at=since, since_seq=after, limit=MAX_TAIL)
        page = await audit.request(TailRequest(params=params), TailResult, timeout=REQUEST_TIMEOUT_S)
        found.extend(page.entries)
        if len(page.entries) < MAX_TAIL:
            return found
        after = page.entries[-1].seq


def spend_rows(entries: Iterable[Entry]) -> list[SpendRow]:
    """One row per goal: its newest spend entry (by seq), attributed to the cron entry behind it."""
    newest: dict[str, Entry] = {}
    for entry in entries:
        if entry.goal_id is None or not entry.body.get("model"):
            continue
        held = newest.get(entry.goal_id)
        if held is None or entry.seq > held.seq:
            newest[entry.goal_id] = entry
    return [
        SpendRow(
            at=datetime.fromisoformat(entry.at),
            model=str(entry.body["model"]),
            input_tokens=int(entry.body.get("input_tokens", 0)),
            output_tokens=int(entry.body.get("output_tokens", 0)),
            cache_read_tokens=int(entry.body.get("cache_read_tokens", 0)),
            cache_write_tokens=int(entry.body.get("cache_write_tokens", 0)),
            goal=goal,
            cron_entry=entry.source.removeprefix(CRON_SOURCE)
            if entry.source.startswith(CRON_SOURCE)
            else None,
        )
        for goal, entry in newest.items()
    ]


def actions_by_agent(entries: Iterable[Entry]) -> dict[str, list[datetime]]:
    """When each agent's unattended tool calls were recorded."""
    taken: dict[str, list[datetime]] = {}
    for entry in entries:
        if is_unattended(entry.source):
            taken.setdefault(entry.agent, []).append(datetime.fromisoformat(entry.at))
    return taken
