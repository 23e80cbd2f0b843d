"""The live activity feed: the audit ledger followed once, fanned out to every open page.

Each page's stream keeps its own cursor (the ledger's sequence number, sent as the SSE event id):
after a reconnect the browser sends ``Last-Event-ID`` and the stream goes on from the entry after
it, so nothing is missed and nothing is sent twice. The follower polls the ledger only while at
least one page is watching, and keeps the newest entries so that pages do not each ask the daemon.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from orchestrator.cli.audit import summarize
from orchestrator.dashboard.client import Daemon, DaemonError
from orchestrator.dashboard.layout import when
from orchestrator.dashboard.markup import Markup, render

POLL_S = 0.1
"""How often the ledger is asked while a page watches: well inside the one second a page promises."""
KEPT = 1000
PAGE = 200


@dataclass(frozen=True)
class FeedFilter:
    agent: str = ""
    channel: str = ""
    kind: str = ""
    goal: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> FeedFilter:
        return cls(
            query.get("agent", "")[:80],
            query.get("channel", "")[:80],
            query.get("kind", "")[:40],
            query.get("goal", "")[:80],
        )

    def matches(self, entry: Mapping[str, Any]) -> bool:
        if self.agent and entry.get("agent") != self.agent:
            return False
        if self.channel and entry.get("source") != f"channel:{self.channel}":
            return False
        if self.goal and entry.get("goal_id") != self.goal:
            return False
        return not self.kind or entry.get("kind") == self.kind

    def query(self) -> dict[str, str]:
        return {k: v for k, v in (("agent", self.agent), ("channel", self.channel), ("kind", self.kind)) if v}


def entry_text(entry: Mapping[str, Any]) -> str:
    body = entry.get("body") or {}
    if entry.get("kind") in ("tool_call", "turn", "approval_requested", "approval_answered", "goal"):
        if entry.get("kind") == "approval_requested":
            return f"approval asked for {body.get('tool')}: {body.get('description', '')}".rstrip(": ")
        if entry.get("kind") == "approval_answered":
            who = body.get("approver") or body.get("answered_by")
            return f"{body.get('behavior')} by {who} ({entry.get('subject')})"
        return summarize(str(entry.get("kind")), body)
    return " ".join(str(entry.get("subject") or summarize(str(entry.get("kind")), body)).split())


def entry_html(entry: Mapping[str, Any]) -> Markup:
    goal = entry.get("goal_id")
    return render(
        '<li class="entry kind-{kind}" id="e{seq}" data-seq="{seq}">{at} <span class="kind">{kind}</span> '
        '<span class="source">{source}</span> <span class="agent">{agent}</span> '
        '<span class="text">{text}</span>{goal}</li>',
        seq=entry.get("seq"),
        at=when(str(entry.get("at") or "")),
        kind=entry.get("kind"),
        source=entry.get("source"),
        agent=entry.get("agent") or "",
        text=entry_text(entry),
        goal=render(' <a href="/goals/{id}">goal {id}</a>', id=goal) if goal else Markup(""),
    )


class LedgerFollower:
    def __init__(self, daemon: Daemon, *, poll_s: float = POLL_S) -> None:
        self._daemon = daemon
        self._poll_s = poll_s
        self._kept: deque[dict[str, Any]] = deque(maxlen=KEPT)
        self._head: int | None = None
        self._changed = anyio.Event()
        self._watchers = 0
        self._watched = anyio.Event()
        self._closed = False
        self._generation = 0

    def close(self) -> None:
        """End every stream for good (the server is stopping): a page reconnects to the next one."""
        self._closed = True
        self.end_streams()

    def end_streams(self) -> None:
        """End the streams open now, as a restart does: each page's browser reconnects by itself with
        ``Last-Event-ID`` and goes on from the entry after the last one it got."""
        self._generation += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def run(self) -> None:
        while True:
            if self._watchers == 0:
                self._watched = anyio.Event()
                await self._watched.wait()
            # The daemon is shutting down or its audit server restarts: the next poll retries.
            with contextlib.suppress(DaemonError):
                await self._poll()
            await anyio.sleep(self._poll_s)

    async def _poll(self) -> None:
        if self._head is None:
            fresh = await self._daemon.tail(limit=PAGE)
        else:
            fresh = await self._daemon.tail(since_seq=self._head, limit=PAGE)
        if fresh:
            self._kept.extend(fresh)
            self._head = int(fresh[-1]["seq"])
            self._changed.set()
            self._changed = anyio.Event()
        elif self._head is None:
            self._head = 0

    async def head(self) -> int:
        if self._head is None:
            newest = await self._daemon.tail(limit=1)
            return int(newest[-1]["seq"]) if newest else 0
        return self._head

    async def after(self, seq: int) -> list[dict[str, Any]]:
        """Entries after ``seq``, oldest first (at most one page): from those kept when they reach
        back far enough, else from the ledger."""
        if self._kept and seq >= int(self._kept[0]["seq"]) - 1:
            return [entry for entry in self._kept if int(entry["seq"]) > seq][:PAGE]
        if self._head is not None and seq >= self._head:
            return []
        return await self._daemon.tail(since_seq=seq, limit=PAGE)

    async def follow(self, cursor: int, wanted: FeedFilter) -> AsyncIterator[dict[str, Any]]:
        """Every entry after ``cursor`` that ``wanted`` matches, as it is written, until cancelled."""
        self._watchers += 1
        self._watched.set()
        generation = self._generation
        try:
            while not self._closed and generation == self._generation:
                changed = self._changed
                batch = await self.after(cursor)
                for entry in batch:
                    cursor = int(entry["seq"])
                    if wanted.matches(entry):
                        yield entry
                if not batch:
                    await changed.wait()
        finally:
            self._watchers -= 1
