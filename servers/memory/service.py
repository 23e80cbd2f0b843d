"""What the tools and the control plane do, over the store, the embedder, the guard and MEMORY.md.

Both surfaces call this one object, so a rule (the content cap, the secret guard, agent scoping)
holds the same way whether a model or the operator asked. Failures a caller can fix are raised as
:class:`MemoryRefused`; ``server.py`` turns them into tool errors and ``admin.py`` into
``INVALID_PARAMS`` errors. No MCP imports.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from servers.memory.consolidate import Report, consolidate
from servers.memory.embeddings import Embedder, EmbeddingError
from servers.memory.errors import MemoryRefused
from servers.memory.guard import SecretBlocked, SecretGuard
from servers.memory.heap import return_memory_to_the_system
from servers.memory.metrics import MemoryMetrics
from servers.memory.models import Memory, NewMemory, Stored, Vector
from servers.memory.notebook import Notebooks, Promotions
from servers.memory.recall import Recalled, Recaller
from servers.memory.reindex import ModelState, Reindexer
from servers.memory.sessions import Appended, SessionStore, UnknownSession
from servers.memory.settings import MemorySettings
from servers.memory.store import MemoryStore
from shared.protocol.memory.admin import ImportProblem
from shared.protocol.memory.memory_md import Promotion
from shared.protocol.memory.meta import Provenance
from shared.protocol.memory.records import ImportRecord
from shared.protocol.memory.sessions import TranscriptEntry
from shared.protocol.memory_terms import KINDS, MAX_SEARCH_LIMIT, RECALL_MODES, Kind, RecallMode

logger = logging.getLogger("nexo.memory")

MAX_TAGS = 16
TRIM_AFTER_SCORED = 10_000
"""A consolidation pass that scored more memories hands its freed heap back (``servers.memory.heap``)."""
MAX_TAG_CHARS = 64


def _kind(value: str) -> Kind:
    for kind in KINDS:
        if kind == value:
            return kind
    raise MemoryRefused(f"unknown kind {value!r}; expected one of {', '.join(KINDS)} (default 'note')")


def _mode(value: str) -> RecallMode:
    for mode in RECALL_MODES:
        if mode == value:
            return mode
    raise MemoryRefused(
        f"unknown mode {value!r}; expected one of {', '.join(RECALL_MODES)} "
        "(hybrid combines keyword and meaning search and is the usual choice)"
    )


def _tags(tags: Sequence[str]) -> tuple[str, ...]:
    if len(tags) > MAX_TAGS:
        raise MemoryRefused(
            f"{len(tags)} tags given; at most {MAX_TAGS} are allowed: keep the most telling ones"
        )
    clean: list[str] = []
    for tag in tags:
        text = tag.strip()
        if not text or len(text) > MAX_TAG_CHARS:
            raise MemoryRefused(
                f"tag {tag!r} is not valid: expected 1-{MAX_TAG_CHARS} characters, e.g. 'family' or 'work'"
            )
        if text not in clean:
            clean.append(text)
    return tuple(clean)


def _importance(value: float) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise MemoryRefused(
            f"importance {value!r} is out of range; expected a number from 0.0 (trivia) to 1.0 (vital), "
            "default 0.5"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class Consolidation:
    report: Report
    promotions: list[Promotion]


@dataclass(slots=True)
class MemoryService:
    settings: MemorySettings
    store: MemoryStore
    sessions: SessionStore
    embedder: Embedder
    guard: SecretGuard
    notebooks: Notebooks
    model: ModelState
    clock: Callable[[], float] = time.time
    metrics: MemoryMetrics = field(default_factory=MemoryMetrics)
    recaller: Recaller = field(init=False)
    reindexer: Reindexer = field(init=False)

    def __post_init__(self) -> None:
        self.recaller = Recaller(self.store, self.embed_one, vector_blocker=self.model.blocker)
        self.reindexer = Reindexer(self.store, self.model, self.embed_many)

    def db_bytes(self) -> int:
        """The database's size on disk, write-ahead log included."""
        path = self.store.db.path
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())

    # -- shared checks -------------------------------------------------------------------------

    def guarded(self, text: str, *, where: str) -> str:
        try:
            return self.guard.check(text, where=where)
        except SecretBlocked as exc:
            raise MemoryRefused(str(exc)) from exc

    def capped(
        self, text: str, *, what: str, fix: str = "store a shorter summary, or split it into several memories"
    ) -> str:
        size = len(text.encode())
        limit = self.settings.max_content_bytes
        if size > limit:
            raise MemoryRefused(
                f"{what} is {size} bytes; the limit is {limit} bytes (NEXO_MEMORY_MAX_CONTENT_BYTES): {fix}"
            )
        return text

    async def embed_one(self, text: str) -> Vector:
        return (await self.embed_many([text]))[0]

    async def embed_many(self, texts: Sequence[str]) -> list[Vector]:
        vectors = await self.embedder.embed(list(texts))
        return [vectors[i] for i in range(len(texts))]

    # -- long-term memory ------------------------------------------------------------------------

    async def remember(
        self,
        agent: str,
        provenance: Provenance,
        content: str,
        *,
        tags: Sequence[str] = (),
        kind: str = "note",
        importance: float = 0.5,
    ) -> Stored:
        text = content.strip()
        if not text:
            raise MemoryRefused("content is empty; pass the sentence to remember, e.g. 'Ana prefers tea'")
        new = NewMemory(
            agent=agent,
            content=self.guarded(self.capped(text, what="content"), where="memory"),
            tags=tuple(self.guarded(tag, where="memory tag") for tag in _tags(tags)),
            kind=_kind(kind),
            provenance=provenance,
            importance=_importance(importance),
        )
        twin = await self.store.find_content(agent, new.content)
        if twin is not None:
            refreshed = await self.store.refresh(twin.id, tags=new.tags, importance=new.importance)
            return Stored(refreshed, created=False)
        vector = await self._vector_for_write(new.content)
        return await self.store.add(new, vector)

    async def _vector_for_write(self, content: str) -> Vector:
        blocked = self.model.blocker()
        if blocked is not None:
            raise MemoryRefused(f"new memories cannot be stored right now: {blocked}")
        try:
            return await self.embed_one(content)
        except EmbeddingError as exc:
            raise MemoryRefused(f"the memory could not be embedded ({exc}); try again later") from exc

    async def recall(
        self,
        agent: str,
        query: str,
        *,
        mode: str = "hybrid",
        limit: int = 8,
        touch: bool = True,
    ) -> Recalled:
        if not query.strip():
            raise MemoryRefused(f"query {query!r} is empty; pass a few words about what to recall")
        if isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise MemoryRefused(f"limit {limit!r} is out of range; expected 1 to {MAX_SEARCH_LIMIT}")
        started = time.perf_counter()
        recalled = await self.recaller.recall(agent, query, mode=_mode(mode), limit=limit, touch=touch)
        self.metrics.recall(recalled.mode, time.perf_counter() - started)
        return recalled

    async def owned(self, agent: str | None, memory_id: int) -> Memory:
        memory = await self.store.get(memory_id)
        if memory is None or (agent is not None and memory.agent != agent):
            owner = f"agent {agent!r} has" if agent is not None else "there is"
            raise MemoryRefused(
                f"{owner} no memory with id {memory_id!r}; call memory_recall to find the id of a memory"
            )
        return memory

    async def forget(self, agent: str | None, memory_id: int) -> Memory:
        await self.owned(agent, memory_id)
        forgotten = await self.store.forget(memory_id)
        if forgotten is None:
            raise MemoryRefused(f"memory {memory_id!r} was forgotten by another request just now")
        return forgotten

    async def import_records(self, records: Sequence[ImportRecord]) -> tuple[int, int, list[ImportProblem]]:
        """Store a batch of records in one transaction: (imported, refreshed, rejected)."""
        started = time.perf_counter()
        imported, refreshed, rejected = await self._import_batch(records)
        self.metrics.import_batch(imported, refreshed, len(rejected), time.perf_counter() - started)
        return imported, refreshed, rejected

    async def _import_batch(self, records: Sequence[ImportRecord]) -> tuple[int, int, list[ImportProblem]]:
        rejected: list[ImportProblem] = []
        ready: list[NewMemory] = []
        for index, record in enumerate(records):
            try:
                ready.append(self._importable(record))
            except MemoryRefused as exc:
                rejected.append(ImportProblem(index=index, error=str(exc)))
        if not ready:
            return 0, 0, rejected
        blocked = self.model.blocker()
        if blocked is not None:
            raise MemoryRefused(f"memories cannot be imported right now: {blocked}")
        try:
            vectors = await self.embed_many([new.content for new in ready])
        except EmbeddingError as exc:
            raise MemoryRefused(f"the batch could not be embedded ({exc}); try the import again") from exc
        stored = await self.store.add_many(list(zip(ready, vectors, strict=True)))
        imported = sum(1 for s in stored if s.created)
        return imported, len(stored) - imported, rejected

    def _importable(self, record: ImportRecord) -> NewMemory:
        content = record.content.strip()
        if not content:
            raise MemoryRefused("content is empty: every record needs the text of its memory")
        return NewMemory(
            agent=record.agent,
            content=self.guarded(self.capped(content, what="content"), where="memory"),
            tags=tuple(self.guarded(tag, where="memory tag") for tag in _tags(record.tags)),
            kind=record.kind,
            provenance=record.provenance,
            importance=record.importance,
            created_at=record.created_at,
            last_accessed_at=record.last_accessed_at,
            access_count=record.access_count,
            archived=record.archived,
        )

    # -- MEMORY.md -----------------------------------------------------------------------------

    async def note(self, agent: str, op: str, *, section: str, text: str, old: str, reason: str) -> str:
        """Edit MEMORY.md; returns the new revision."""
        if op == "append":
            if not section.strip():
                raise MemoryRefused("op='append' needs a section, e.g. section='Preferences'")
            return await self.notebooks.append(agent, section, text, reason=reason)
        if op == "replace":
            if not old:
                raise MemoryRefused(
                    "op='replace' needs old (the exact text to replace) and text (the new text)"
                )
            return await self.notebooks.replace(agent, old, text, reason=reason)
        if op == "remove":
            return await self.notebooks.remove(agent, text, reason=reason)
        raise MemoryRefused(f"unknown op {op!r}; expected 'append', 'replace' or 'remove'")

    # -- sessions ------------------------------------------------------------------------------

    async def append_transcript(
        self, agent: str, session_id: int, entries: Sequence[TranscriptEntry]
    ) -> tuple[Appended, Consolidation | None]:
        """Store transcript entries; (what was stored, the consolidation pass they triggered)."""
        checked = []
        for index, entry in enumerate(entries):
            where = f"transcript entry {index}"
            capped = self.capped(entry.content, what=where, fix="store a shortened entry instead")
            content = self.guarded(capped, where=where)
            checked.append(entry.model_copy(update={"content": content}))
        try:
            appended = await self.sessions.append(agent, session_id, checked)
        except UnknownSession as exc:
            raise MemoryRefused(
                f"agent {agent!r} has no session {session_id!r} (it may have been removed after being idle); "
                "resolve the session key again to get its id"
            ) from exc
        every = self.settings.consolidation.every_assistant_turns
        due = every > 0 and appended.assistant_turns_before // every < appended.assistant_turns_after // every
        if not due:
            return appended, None
        try:
            return appended, await self.consolidate(agent)
        except (MemoryRefused, sqlite3.Error) as exc:
            # The entries are stored; the next pass will try again.
            logger.warning("consolidation of agent %s failed: %s", agent, exc)
            return appended, None

    # -- consolidation -------------------------------------------------------------------------

    async def consolidate(self, agent: str) -> Consolidation:
        notebook = Promotions(self.notebooks)
        report = await consolidate(
            self.store, notebook, agent, policy=self.settings.consolidation.policy(), now=self.clock()
        )
        if report.scored > TRIM_AFTER_SCORED:
            # Scoring held a row per memory: tens of MB at a million, freed but kept by glibc.
            await anyio.to_thread.run_sync(return_memory_to_the_system)
        logger.info(
            "consolidated agent %s: %d scored, %d promoted, %d archived",
            agent,
            report.scored,
            len(report.promoted),
            report.archived_count,
        )
        promotions = [
            Promotion(memory_id=memory_id, reason=reason)
            for memory_id, reason in zip(report.promoted, notebook.reasons, strict=True)
        ]
        return Consolidation(report, promotions)
