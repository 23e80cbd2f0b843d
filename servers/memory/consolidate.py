"""Consolidation ("light dreaming"): promote warm memories to MEMORY.md, archive the coldest.

The working set shapes what the agent reads unasked (MEMORY.md), never what it can recall: a
store of a million memories keeps every one of them findable by ``memory_recall``.

No model is called. Each active memory of an agent gets a warmth score::

    score = importance
          * 0.5 ** (age_days / half_life_days)               # decay: old memories fade
          * (1 + ln(1 + access_count))                       # access: recalled ones matter
          * 0.5 ** (idle_days / recency_half_life_days)      # recency: recently used ones matter now

with ``age_days`` counted from ``created_at`` and ``idle_days`` from ``last_accessed_at`` (a
duplicate ``memory_remember`` and every recall refresh it). Then, warmest first:

1. memories scoring at least ``promote_threshold`` that came from the owner or the agent itself,
   were never promoted and are not in MEMORY.md yet are appended under ``## Consolidated``, at most
   ``promote_max`` per pass, until MEMORY.md's budget refuses more (content from contacts, tools or
   untrusted sources is never promoted: MEMORY.md is read as the agent's own notes);
2. when more than ``working_set_max`` memories are active, the coldest beyond that number are
   archived: they leave the working set (the memories scored for promotion by the next passes),
   nothing is deleted, and recall still finds them in every mode. Recalling one, or remembering
   the same content again, brings it back.

The pass is deterministic for a given clock reading: ties are broken by id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from servers.memory.errors import MemoryRefused
from servers.memory.models import Memory
from servers.memory.store import MemoryStore

if TYPE_CHECKING:
    import numpy as np

DAY_S = 86_400.0
SECTION = "Consolidated"
ENTRY_MAX_CHARS = 280
PROMOTABLE = frozenset({"owner", "agent"})
SCORE_PAGE = 50_000
"""Memories read per statement while scoring a pass."""
ARCHIVED_SHOWN = 100
"""Archived ids a report lists (the lowest); ``Report.archived_count`` counts them all. A pass over a
million memories archives nearly all of them, and listing every id (995,000 Python ints, then their
JSON in the control-plane result) grew the server by tens of MB that it never gave back."""


class Notebook(Protocol):
    """The agents' MEMORY.md files; failures surface as :class:`MemoryRefused`."""

    async def read(self, agent: str) -> str: ...

    async def append(self, agent: str, section: str, entry: str, *, reason: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Policy:
    half_life_days: float = 30.0
    recency_half_life_days: float = 7.0
    promote_threshold: float = 1.0
    promote_max: int = 5
    working_set_max: int = 5_000


@dataclass(slots=True)
class Report:
    agent: str
    scored: int = 0
    promoted: list[int] = field(default_factory=list)
    archived: list[int] = field(default_factory=list)
    """The lowest ``ARCHIVED_SHOWN`` ids this pass archived (every one when it archived no more)."""
    archived_count: int = 0
    skipped: list[str] = field(default_factory=list)


def warmth(memory: Memory, now: float, policy: Policy) -> float:
    """The score in this module's docstring."""
    return _warmth(
        memory.importance, memory.created_at, memory.last_accessed_at, memory.access_count, now, policy
    )


def _warmth(
    importance: float,
    created_at: float,
    last_accessed_at: float,
    access_count: int,
    now: float,
    policy: Policy,
) -> float:
    age_days = max(0.0, now - created_at) / DAY_S
    idle_days = max(0.0, now - last_accessed_at) / DAY_S
    decay = math.pow(0.5, age_days / policy.half_life_days)
    recency = math.pow(0.5, idle_days / policy.recency_half_life_days)
    return importance * decay * (1.0 + math.log1p(access_count)) * recency


def entry_text(content: str) -> str:
    """One line for MEMORY.md: whitespace collapsed, long content shortened."""
    line = re.sub(r"\s+", " ", content).strip()
    if len(line) > ENTRY_MAX_CHARS:
        line = line[: ENTRY_MAX_CHARS - 1].rstrip() + "…"
    return line


async def consolidate(
    store: MemoryStore, notebook: Notebook, agent: str, *, policy: Policy, now: float, page: int = SCORE_PAGE
) -> Report:
    """One pass over the agent's active memories; ``page``: rows read per statement while scoring."""
    report = Report(agent)
    ids, scores, promotable = await _scored(store, agent, now, policy, page)
    report.scored = len(ids)
    # Warmest first, ties by id (higher first): the order the docstring promises.
    order = _np().lexsort((-ids, -scores))
    await _promote(
        store,
        notebook,
        agent,
        ((float(scores[i]), int(ids[i])) for i in order.tolist() if promotable[i]),
        policy,
        report,
    )
    excess = len(order) - policy.working_set_max
    if excess > 0:
        coldest = _np().sort(ids[order[-excess:]])
        await store.set_archived(coldest, True)
        report.archived, report.archived_count = coldest[:ARCHIVED_SHOWN].tolist(), int(coldest.size)
    return report


def _np() -> ModuleType:
    import numpy  # loaded with the first pass, not with the server (see servers.memory.vectors)

    return numpy


async def _scored(
    store: MemoryStore, agent: str, now: float, policy: Policy, page: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every active memory's id, warmth and whether it may be promoted, as arrays (17 bytes a
    memory), read ``page`` rows at a time: holding a million memories' text and objects for
    a pass grew the server by hundreds of MB, much of it never given back to the system."""
    numpy = _np()
    ids: list[np.ndarray] = [numpy.empty(0, numpy.int64)]
    scores: list[np.ndarray] = [numpy.empty(0, numpy.float64)]
    promotable: list[np.ndarray] = [numpy.empty(0, bool)]
    after = 0
    while rows := await store.active_scores(agent, after, page):
        n = len(rows)
        ids.append(numpy.fromiter((row[0] for row in rows), dtype=numpy.int64, count=n))
        scores.append(
            numpy.fromiter(
                (_warmth(row[1], row[2], row[3], row[4], now, policy) for row in rows),
                dtype=numpy.float64,
                count=n,
            )
        )
        promotable.append(
            numpy.fromiter((row[6] is None and row[5] in PROMOTABLE for row in rows), dtype=bool, count=n)
        )
        after = int(rows[-1][0])
    return numpy.concatenate(ids), numpy.concatenate(scores), numpy.concatenate(promotable)


async def _promote(
    store: MemoryStore,
    notebook: Notebook,
    agent: str,
    promotable: Iterator[tuple[float, int]],
    policy: Policy,
    report: Report,
) -> None:
    """Promote the warmest memories that may be (never promoted, the owner's or the agent's own)."""
    text: str | None = None
    for score, memory_id in promotable:
        if len(report.promoted) >= policy.promote_max or score < policy.promote_threshold:
            return
        memory = await store.get(memory_id)
        if memory is None:
            continue
        if text is None:
            text = await notebook.read(agent)
        entry = entry_text(memory.content)
        if entry not in text:
            try:
                await notebook.append(
                    agent, SECTION, entry, reason=f"consolidate: memory {memory.id} (warmth {score:.2f})"
                )
            except MemoryRefused as exc:
                # Usually the budget: nothing warmer-than-this fits, so stop rather than try colder ones.
                report.skipped.append(f"memory {memory.id}: {exc}")
                return
            text += "\n" + entry
            report.promoted.append(memory.id)
        await store.mark_promoted(memory.id)
