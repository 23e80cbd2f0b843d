"""MEMORY.md: what an agent chose to remember, as a Markdown file in a git repository of its own.

Each agent has ``<root>/<agent>/``, a git repository holding ``MEMORY.md``, so ``git log MEMORY.md``
is the audit of every change. The model never rewrites the file: it appends an entry under a
section, replaces or removes an exact, unique piece of text, or rolls back to an earlier revision
(as a new commit, so history is never lost). Every write passes the secret guard, respects a size
budget, is written atomically (temp file, fsync, rename) and committed at once; writes to one
agent's file are serialised by a lock shared by every ``MemoryFile`` of that directory in this
process. A change left on disk without a commit (a crash between the rename and the commit, or an
operator's hand edit) is committed as ``recover: uncommitted change`` before the next write.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from weakref import WeakValueDictionary

import anyio
import anyio.to_thread

from servers.memory.git import run_git
from servers.memory.guard import SecretGuard

FILENAME = "MEMORY.md"
WHERE = "MEMORY.md"
AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SECTION_MAX_CHARS = 120
SUBJECT_MAX_CHARS = 72
HISTORY_MAX = 1000
_SECTION_END = re.compile(r"#{1,2}\s")
_SECTION_HEADING = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)
_LOG_FORMAT = "--format=%H%x1f%cI%x1f%B%x1e"

logger = logging.getLogger(__name__)
_locks: WeakValueDictionary[str, anyio.Lock] = WeakValueDictionary()


class MemoryFileError(Exception):
    """A refused or failed MEMORY.md operation; the message names the problem and the fix."""


@dataclass(frozen=True)
class Revision:
    rev: str
    """The full commit id."""
    when: datetime
    """Commit time, timezone-aware."""
    message: str
    """The whole commit message: a subject saying what changed, then the reason when one was given."""


def validate_agent(agent: str) -> str:
    if not AGENT_ID.fullmatch(agent):
        raise MemoryFileError(
            f"agent id {agent!r} is not valid: expected 1-64 letters, digits, '_' or '-' "
            "(no path separators, dots or spaces); use the agent id from the configuration"
        )
    return agent


class MemoryFile:
    def __init__(self, root: Path, agent: str, *, guard: SecretGuard, budget_bytes: int = 16_384) -> None:
        if budget_bytes <= 0:
            raise MemoryFileError(f"budget_bytes must be a positive number of bytes, got {budget_bytes!r}")
        self.agent = validate_agent(agent)
        self.directory = root / agent
        self.path = self.directory / FILENAME
        self.budget_bytes = budget_bytes
        self._guard = guard
        key = str(self.directory.absolute())
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = anyio.Lock()
        self._lock = lock

    # -- reading -------------------------------------------------------------------------------

    async def read(self) -> str:
        """The current text ("" before the first write)."""
        return await anyio.to_thread.run_sync(self._read_sync)

    async def history(self, limit: int = 20) -> list[Revision]:
        """The newest ``limit`` revisions, newest first."""
        if not 1 <= limit <= HISTORY_MAX:
            raise MemoryFileError(f"limit must be between 1 and {HISTORY_MAX}, got {limit!r}")
        if not await self._has_commits():
            return []
        result = await run_git(self.directory, "log", f"--max-count={limit}", _LOG_FORMAT)
        return [_revision(record) for record in result.stdout.decode().split("\x1e") if record.strip()]

    async def diff(self, rev: str) -> str:
        """What ``rev`` changed in MEMORY.md, as a unified diff against its parent ("" if nothing)."""
        commit = await self._resolve(rev)
        shown = await run_git(
            self.directory, "show", "--no-color", "--no-ext-diff", "--format=", commit, "--", FILENAME
        )
        return shown.stdout.decode(errors="replace")

    # -- edits ---------------------------------------------------------------------------------

    async def append(self, section: str, entry: str, *, reason: str, promotion: bool = False) -> Revision:
        """Add ``entry`` as a bullet at the end of ``## section``, creating the section if needed.

        The revision's subject says who added it: ``promote:`` for a memory consolidation copied in
        (``promotion=True``), ``append:`` for an edit the agent or the operator asked for.
        """
        section = self._guard.check(_section_name(_utf8(section, "section")), where=WHERE)
        entry = self._guard.check(_entry_text(_utf8(entry, "entry")), where=WHERE)
        reason = self._guard.check(_utf8(reason, "reason"), where=WHERE)
        async with self._lock:
            current = await self._prepare()
            updated = add_entry(current, section, entry)
            verb = "promote" if promotion else "append"
            return await self._save(current, updated, f"{verb}: {_first_line(entry, verb)}", reason)

    async def replace(self, old: str, new: str, *, reason: str) -> Revision:
        """Replace the one occurrence of ``old`` with ``new``."""
        new = self._guard.check(_utf8(new, "replacement text"), where=WHERE)
        reason = self._guard.check(_utf8(reason, "reason"), where=WHERE)
        async with self._lock:
            current = await self._prepare()
            start = self._unique(current, old)
            if new == old:
                raise MemoryFileError(f"replacing {_shown(old)} with the same text changes nothing")
            updated = current[:start] + new + current[start + len(old) :]
            subject = f"edit: replace in {_section_at(current, start)}"
            return await self._save(current, updated, subject, reason)

    async def remove(self, text: str, *, reason: str) -> Revision:
        """Remove the one occurrence of ``text`` (and the bullet or line it leaves empty)."""
        reason = self._guard.check(_utf8(reason, "reason"), where=WHERE)
        async with self._lock:
            current = await self._prepare()
            start = self._unique(current, text)
            updated = remove_text(current, start, start + len(text))
            subject = f"edit: remove from {_section_at(current, start)}"
            return await self._save(current, updated, subject, reason)

    async def rollback(self, rev: str) -> Revision:
        """Restore MEMORY.md as it was at ``rev``, as a new commit (the history in between stays)."""
        async with self._lock:
            # Resolved first: a bad rev must not create a repository. "HEAD" then means the last
            # commit even when _prepare commits an uncommitted change, i.e. it undoes that change.
            commit = await self._resolve(rev)
            current = await self._prepare()
            shown = await run_git(self.directory, "show", f"{commit}:{FILENAME}", check=False)
            # A revision without the file (one that recorded its deletion) means an empty memory.
            restored = shown.stdout.decode() if shown.returncode == 0 else ""
            restored = self._guard.check(restored, where=WHERE)
            if restored == current:
                raise MemoryFileError(
                    f"MEMORY.md of agent {self.agent!r} already matches revision {rev!r}; "
                    "nothing to roll back"
                )
            return await self._save(current, restored, f"rollback to {commit[:12]}", "")

    # -- internals -----------------------------------------------------------------------------

    def _read_sync(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def _unique(self, document: str, text: str) -> int:
        if not text:
            raise MemoryFileError("the text to find is empty; pass the exact text as shown by read")
        start = document.find(text)
        if start < 0:
            raise MemoryFileError(
                f"{_shown(text)} does not occur in MEMORY.md of agent {self.agent!r}; "
                "call read and copy the exact text, whitespace included"
            )
        count = _occurrences(document, text)
        if count > 1:
            raise MemoryFileError(
                f"{_shown(text)} occurs {count} times in MEMORY.md of agent {self.agent!r}; "
                "include some surrounding text so that it matches exactly once"
            )
        return start

    async def _has_commits(self) -> bool:
        if not (self.directory / ".git").is_dir():
            return False
        result = await run_git(self.directory, "rev-parse", "--quiet", "--verify", "HEAD", check=False)
        return result.returncode == 0

    async def _resolve(self, rev: str) -> str:
        unknown = MemoryFileError(
            f"unknown revision {rev!r} of MEMORY.md for agent {self.agent!r}; "
            "call history to list revisions and pass one of their rev values"
        )
        if not rev or rev.startswith("-") or not rev.isprintable() or not await self._has_commits():
            raise unknown
        result = await run_git(
            self.directory,
            "rev-parse",
            "--quiet",
            "--verify",
            "--end-of-options",
            f"{rev}^{{commit}}",
            check=False,
        )
        if result.returncode != 0:
            raise unknown
        return result.stdout.decode().strip()

    async def _prepare(self) -> str:
        """Make sure the repository exists and is clean; return the current text."""
        if not (self.directory / ".git").is_dir():
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            await run_git(self.directory, "init", "--quiet", "--initial-branch=main")
        stale = self.directory / ".git" / "index.lock"
        if stale.exists():
            # Writes are serialised by our lock, so a lock file now is left from a killed git.
            logger.warning(
                "%s: removing the stale lock file %s left by an interrupted git", self.agent, stale
            )
            stale.unlink()
        status = await run_git(
            self.directory, "status", "--porcelain", "--untracked-files=all", "--", FILENAME
        )
        current = await self.read()
        if status.stdout.strip():
            logger.warning("%s: committing a change to %s that was never committed", self.agent, FILENAME)
            guarded = self._guard.check(current, where=f"uncommitted {WHERE}")
            if guarded != current:
                await anyio.to_thread.run_sync(self._write_sync, guarded)
            await self._commit("recover: uncommitted change", "")
            current = guarded
        return current

    async def _save(self, current: str, updated: str, subject: str, reason: str) -> Revision:
        size, before = len(updated.encode()), len(current.encode())
        if size > self.budget_bytes and size > before:
            raise MemoryFileError(
                f"MEMORY.md of agent {self.agent!r} would grow to {size} bytes, over its budget of "
                f"{self.budget_bytes} bytes (it is {before} bytes now); remove entries or consolidate "
                "several into one shorter entry, then try again"
            )
        await anyio.to_thread.run_sync(self._write_sync, updated)
        return await self._commit(subject, reason)

    def _write_sync(self, text: str) -> None:
        # The temp file lives in .git/: same filesystem as MEMORY.md (so the rename is atomic) and
        # invisible to git status if a crash leaves it behind.
        fd, tmp = tempfile.mkstemp(dir=self.directory / ".git", prefix="MEMORY.md.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode())
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    async def _commit(self, subject: str, reason: str) -> Revision:
        await run_git(self.directory, "add", "--all", "--", FILENAME)
        message = ["-m", subject] + (["-m", reason.strip()] if reason.strip() else [])
        await run_git(self.directory, "commit", "--quiet", "--no-verify", *message)
        result = await run_git(self.directory, "log", "--max-count=1", _LOG_FORMAT)
        return _revision(result.stdout.decode().split("\x1e")[0])


# -- the text edits (pure functions) ---------------------------------------------------------


def add_entry(document: str, section: str, entry: str) -> str:
    bullet = ["- " + line if i == 0 else "  " + line for i, line in enumerate(entry.split("\n"))]
    lines = document.removesuffix("\n").split("\n") if document else []
    heading = next(
        (i for i, line in enumerate(lines) if line.startswith("## ") and _same_section(line[3:], section)),
        None,
    )
    if heading is None:
        body = document.rstrip("\n")
        return (f"{body}\n\n" if body else "") + f"## {section}\n\n" + "\n".join(bullet) + "\n"
    end = next((j for j in range(heading + 1, len(lines)) if _SECTION_END.match(lines[j])), len(lines))
    if any(lines[j : j + len(bullet)] == bullet for j in range(heading + 1, end)):
        raise MemoryFileError(
            f"{_shown(entry)} is already in section {section!r}; nothing to add (use replace to change it)"
        )
    last = max((j for j in range(heading + 1, end) if lines[j].strip()), default=heading)
    spacer = [""] if last == heading else []
    return "\n".join([*lines[: last + 1], *spacer, *bullet, *lines[last + 1 :]]) + "\n"


def remove_text(document: str, start: int, end: int) -> str:
    """Cut ``[start, end)``; the lines it leaves blank or as a bare bullet go with it."""
    line_start = document.rfind("\n", 0, start) + 1
    if document[end - 1] == "\n":
        line_end = end  # the cut took whole lines up to a newline: the next line is untouched
    else:
        newline = document.find("\n", end)
        line_end = len(document) if newline < 0 else newline + 1
    if (document[line_start:start] + document[end:line_end]).strip() in ("", "-", "*"):
        return document[:line_start] + document[line_end:]
    return document[:start] + document[end:]


def _same_section(heading: str, section: str) -> bool:
    return heading.strip().casefold() == section.casefold()


def _utf8(text: str, what: str) -> str:
    """Text from JSON may hold unpaired surrogates, which no UTF-8 file or git message can."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise MemoryFileError(
            f"the {what} holds a character that cannot be stored as UTF-8 (an unpaired surrogate at "
            f"position {exc.start}); remove it and try again"
        ) from exc
    return text


def _section_name(section: str) -> str:
    name = section.strip().lstrip("#").strip()
    if not name or "\n" in name or len(name) > SECTION_MAX_CHARS:
        raise MemoryFileError(
            f"section {_shown(section)} is not valid: expected one line of text of at most "
            f"{SECTION_MAX_CHARS} characters, such as 'Preferences'"
        )
    return name


def _entry_text(entry: str) -> str:
    lines = [line.rstrip() for line in entry.strip().split("\n") if line.strip()]
    if not lines:
        raise MemoryFileError(
            "the entry is empty; pass the text to remember, such as 'Prefers tea to coffee'"
        )
    lines[0] = re.sub(r"^[-*] +", "", lines[0])
    return "\n".join(lines)


def _section_at(document: str, index: int) -> str:
    headings = _SECTION_HEADING.findall(document, 0, index)
    return f"section {headings[-1]}" if headings else "the preamble"


def _first_line(text: str, verb: str) -> str:
    line = text.split("\n", 1)[0]
    limit = SUBJECT_MAX_CHARS - len(f"{verb}: ")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _occurrences(document: str, text: str) -> int:
    """Overlapping occurrences too: "aa" occurs twice in "aaa", and either could be meant."""
    count, at = 0, document.find(text)
    while at >= 0:
        count += 1
        at = document.find(text, at + 1)
    return count


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:77] + "...")


def _revision(record: str) -> Revision:
    rev, when, message = record.strip("\n").split("\x1f", 2)
    return Revision(rev, datetime.fromisoformat(when), message.strip())
