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
from dataclasses import dataclass, field
from typing import Protocol

from servers.memory.errors import MemoryRefused
from servers.memory.models import Memory
from servers.memory.store import MemoryStore

DAY_S = 86_400.0
SECTION = "Consolidated"
ENTRY_MAX_CHARS = 280
PROMOTABLE = frozenset({"owner", "agent"})


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
    skipped: list[str] = field(default_factory=list)


def warmth(memory: Memory, now: float, policy: Policy) -> float:
    """The score in this module's docstring."""
    age_days = max(0.0, now - memory.created_at) / DAY_S
    idle_days = max(0.0, now - memory.last_accessed_at) / DAY_S
    decay = math.pow(0.5, age_days / policy.half_life_days)
    recency = math.pow(0.5, idle_days / policy.recency_half_life_days)
    return memory.importance * decay * (1.0 + math.log1p(memory.access_count)) * recency


def entry_text(content: str) -> str:
    """One line for MEMORY.md: whitespace collapsed, long content shortened."""
    line = re.sub(r"\s+", " ", content).strip()
    if len(line) > ENTRY_MAX_CHARS:
        line = line[: ENTRY_MAX_CHARS - 1].rstrip() + "…"
    return line


async def consolidate(
    store: MemoryStore, notebook: Notebook, agent: str, *, policy: Policy, now: float
) -> Report:
    report = Report(agent)
    memories = await store.active(agent)
    report.scored = len(memories)
    ranked = sorted(((warmth(m, now, policy), m) for m in memories), key=lambda p: (-p[0], -p[1].id))
    await _promote(store, notebook, agent, ranked, policy, report)
    excess = len(ranked) - policy.working_set_max
    if excess > 0:
        report.archived = sorted(m.id for _, m in ranked[-excess:])
        await store.set_archived(report.archived, True)
    return report


async def _promote(
    store: MemoryStore,
    notebook: Notebook,
    agent: str,
    ranked: list[tuple[float, Memory]],
    policy: Policy,
    report: Report,
) -> None:
    text: str | None = None
    for score, memory in ranked:
        if len(report.promoted) >= policy.promote_max or score < policy.promote_threshold:
            return
        if memory.promoted_at is not None or memory.provenance not in PROMOTABLE:
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
