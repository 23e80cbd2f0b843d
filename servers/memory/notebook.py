"""Every agent's MEMORY.md behind one object, with failures turned into :class:`MemoryRefused`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servers.memory.errors import MemoryRefused
from servers.memory.git import GitError
from servers.memory.guard import SecretBlocked, SecretGuard
from servers.memory.memory_md import MemoryFile, MemoryFileError, Revision
from shared.db import StorageCondition, disk_is_full, is_storage_full

# OSError too: a damaged agent directory should read as a refusal naming the path, not a masked crash.
_REFUSALS = (MemoryFileError, SecretBlocked, GitError, OSError)


@dataclass(frozen=True, slots=True)
class Notes:
    content: str
    revisions: list[Revision]


class Notebooks:
    """``<root>/<agent>/MEMORY.md`` for each agent, created on first write."""

    def __init__(self, root: Path, *, guard: SecretGuard, budget_bytes: int) -> None:
        self.root = root
        self._guard = guard
        self._budget = budget_bytes
        self._files: dict[str, MemoryFile] = {}
        self.storage = StorageCondition(root)
        """Whether MEMORY.md writes currently fail because the disk is full."""

    def _refused(self, exc: Exception) -> MemoryRefused:
        # git reports a full disk only in its own words, so a failed write on a full disk counts too.
        if is_storage_full(exc) or (isinstance(exc, OSError | GitError) and disk_is_full(self.root)):
            return MemoryRefused(str(self.storage.refused(exc)))
        return MemoryRefused(str(exc))

    def _written(self, rev: str) -> str:
        self.storage.stored()
        return rev

    def file(self, agent: str) -> MemoryFile:
        memory_file = self._files.get(agent)
        if memory_file is None:
            try:
                memory_file = MemoryFile(self.root, agent, guard=self._guard, budget_bytes=self._budget)
            except MemoryFileError as exc:
                raise MemoryRefused(str(exc)) from exc
            self._files[agent] = memory_file
        return memory_file

    async def read(self, agent: str) -> str:
        try:
            return await self.file(agent).read()
        except _REFUSALS as exc:
            raise MemoryRefused(str(exc)) from exc

    async def notes(self, agent: str, limit: int) -> Notes:
        memory_file = self.file(agent)
        try:
            return Notes(await memory_file.read(), await memory_file.history(limit))
        except _REFUSALS as exc:
            raise MemoryRefused(str(exc)) from exc

    async def diff(self, agent: str, rev: str) -> str:
        try:
            return await self.file(agent).diff(rev)
        except _REFUSALS as exc:
            raise MemoryRefused(str(exc)) from exc

    async def append(
        self, agent: str, section: str, entry: str, *, reason: str, promotion: bool = False
    ) -> str:
        """Add ``entry``; ``promotion`` marks it as consolidation's copy of a memory (see MemoryFile)."""
        try:
            written = await self.file(agent).append(section, entry, reason=reason, promotion=promotion)
            return self._written(written.rev)
        except _REFUSALS as exc:
            raise self._refused(exc) from exc

    async def replace(self, agent: str, old: str, new: str, *, reason: str) -> str:
        try:
            return self._written((await self.file(agent).replace(old, new, reason=reason)).rev)
        except _REFUSALS as exc:
            raise self._refused(exc) from exc

    async def remove(self, agent: str, text: str, *, reason: str) -> str:
        try:
            return self._written((await self.file(agent).remove(text, reason=reason)).rev)
        except _REFUSALS as exc:
            raise self._refused(exc) from exc

    async def rollback(self, agent: str, rev: str) -> tuple[str, str]:
        """Restore ``rev`` as a new revision: (new rev, restored content)."""
        memory_file = self.file(agent)
        try:
            revision = await memory_file.rollback(rev)
            return revision.rev, await memory_file.read()
        except _REFUSALS as exc:
            raise MemoryRefused(str(exc)) from exc


class Promotions:
    """MEMORY.md as consolidation writes to it: every append is a promotion, and each one's reason
    is kept so the caller can report it (the orchestrator writes a ``memory_promotion`` entry)."""

    def __init__(self, notebooks: Notebooks) -> None:
        self._notebooks = notebooks
        self.reasons: list[str] = []
        """One per successful append, in order: consolidation's report lists the same memories."""

    async def read(self, agent: str) -> str:
        return await self._notebooks.read(agent)

    async def append(self, agent: str, section: str, entry: str, *, reason: str) -> str:
        rev = await self._notebooks.append(agent, section, entry, reason=reason, promotion=True)
        self.reasons.append(reason)
        return rev
