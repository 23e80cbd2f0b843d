"""The hash chain: canonical entry encoding, entry hashes, removed ranges and verification.

``hash = sha256(prev_hash || canonical(entry))`` where ``prev_hash`` is the previous entry's hash as
32 raw bytes (:data:`GENESIS` for the first entry) and ``canonical(entry)`` is the JSON array
``[seq, at, kind, source, agent, goal_id, subject, body]`` with sorted keys and no whitespace. The
array fixes the field order; sorted keys fix the body's. Pure functions, no I/O: the store feeds
rows in, so tests can verify any sequence of rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.protocol.audit.digest import canonical_json
from shared.protocol.audit.entries import Head, Problem, VerifyReport

GENESIS = hashlib.sha256(b"nexo audit ledger v1").hexdigest()
"""The ``prev_hash`` of entry 1: a fixed value, so an empty ledger has a well-known head."""


@dataclass(frozen=True, slots=True)
class Row:
    """One stored ledger row, exactly as read from SQLite (``body`` is its JSON text)."""

    seq: int
    at: str
    kind: str
    source: str
    agent: str
    goal_id: str | None
    subject: str
    body: str
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True, order=True)
class RemovedRange:
    """Entries ``first..last`` removed by retention: what linked into them and their last hash."""

    first: int
    last: int
    prev_hash: str
    """The hash of entry ``first - 1``, which entry ``first`` linked to."""
    last_hash: str
    """The hash of entry ``last``, which entry ``last + 1`` links to."""


def canonical_entry(
    seq: int, at: str, kind: str, source: str, agent: str, goal_id: str | None, subject: str, body: Any
) -> bytes:
    return canonical_json([seq, at, kind, source, agent, goal_id, subject, body]).encode()


def entry_hash(prev_hash: str, canonical: bytes) -> str:
    return hashlib.sha256(bytes.fromhex(prev_hash) + canonical).hexdigest()


def row_hash(row: Row) -> str | None:
    """The hash ``row`` should have given its content; None when its body is not valid JSON."""
    try:
        body = json.loads(row.body)
        canonical = canonical_entry(
            row.seq, row.at, row.kind, row.source, row.agent, row.goal_id, row.subject, body
        )
        return entry_hash(row.prev_hash, canonical)
    except ValueError:
        return None


def ranges_digest(ranges: Iterable[RemovedRange]) -> str:
    """What a checkpoint records about the whole removed-range table, so the table cannot be edited."""
    listed = [[r.first, r.last, r.prev_hash, r.last_hash] for r in sorted(ranges)]
    return hashlib.sha256(canonical_json(listed).encode()).hexdigest()


def runs(removed: Sequence[tuple[int, str, str]]) -> list[RemovedRange]:
    """Removed rows ``(seq, prev_hash, hash)`` as ranges of consecutive, correctly linked entries."""
    result: list[RemovedRange] = []
    for seq, prev_hash, hash_ in sorted(removed):
        last = result[-1] if result else None
        if last is not None and last.last + 1 == seq and last.last_hash == prev_hash:
            result[-1] = RemovedRange(last.first, seq, last.prev_hash, hash_)
        else:
            result.append(RemovedRange(seq, seq, prev_hash, hash_))
    return result


def merge(ranges: Iterable[RemovedRange]) -> list[RemovedRange]:
    """Join adjacent ranges whose links agree. Ranges that do not link stay apart, so verify still
    reports the break instead of a merge hiding it."""
    result: list[RemovedRange] = []
    for current in sorted(ranges):
        last = result[-1] if result else None
        if last is not None and last.last + 1 == current.first and last.last_hash == current.prev_hash:
            result[-1] = RemovedRange(last.first, current.last, last.prev_hash, current.last_hash)
        else:
            result.append(current)
    return result


def _short(value: str) -> str:
    return f"{value[:12]}…" if len(value) > 12 else repr(value)


class _Walk:
    """State of one verification walk over rows in seq order."""

    def __init__(self, ranges: Sequence[RemovedRange], expected_head: Head | None) -> None:
        self.ranges = {r.first: r for r in ranges}
        self.expected_head = expected_head
        self.prev = GENESIS
        self.last_seq = 0
        self.checked = 0
        self.checkpoints = 0
        self.head_hash_seen: str | None = None

    def _bridge(self, stop: int) -> Problem | None:
        """Cross the gap before entry ``stop`` using recorded removed ranges."""
        cursor = self.last_seq + 1
        while cursor < stop:
            removed = self.ranges.get(cursor)
            if removed is None:
                return Problem(
                    seq=cursor,
                    kind="seq_gap",
                    detail=f"entry {cursor} is missing (the next entry present is {stop}) and no "
                    "retention checkpoint records its removal: it was deleted outside retention",
                )
            if removed.last >= stop:
                return Problem(
                    seq=stop,
                    kind="checkpoint_mismatch",
                    detail=f"entry {stop} is present inside the range {removed.first}..{removed.last} "
                    "that a checkpoint records as removed: it was inserted afterwards",
                )
            if removed.prev_hash != self.prev:
                return Problem(
                    seq=cursor,
                    kind="checkpoint_mismatch",
                    detail=f"the removed range {removed.first}..{removed.last} follows hash "
                    f"{_short(removed.prev_hash)} but the entry before it hashes to {_short(self.prev)}",
                )
            self.prev = removed.last_hash
            if self.expected_head is not None and removed.last == self.expected_head.seq:
                self.head_hash_seen = removed.last_hash
            cursor = removed.last + 1
        return None

    def step(self, row: Row) -> Problem | None:
        if row.seq != self.last_seq + 1:
            problem = self._bridge(row.seq)
            if problem is not None:
                return problem
        if row.prev_hash != self.prev:
            return Problem(
                seq=row.seq,
                kind="prev_link_broken",
                detail=f"entry {row.seq} links to {_short(row.prev_hash)} but the entry before it "
                f"hashes to {_short(self.prev)}: entries were reordered, replaced or removed",
            )
        computed = row_hash(row)
        if computed != row.hash:
            why = "its body is not valid JSON" if computed is None else "its content does not match its hash"
            return Problem(
                seq=row.seq,
                kind="hash_mismatch",
                detail=f"entry {row.seq} ({row.kind}) was edited: {why} (stored {_short(row.hash)}, "
                f"computed {_short(computed or '')})",
            )
        self.prev, self.last_seq = row.hash, row.seq
        self.checked += 1
        self.checkpoints += row.kind == "checkpoint"
        if self.expected_head is not None and row.seq == self.expected_head.seq:
            self.head_hash_seen = row.hash
        return None

    def after_last(self) -> Problem | None:
        beyond = sorted(r.first for r in self.ranges.values() if r.first > self.last_seq)
        if beyond:
            return Problem(
                seq=beyond[0],
                kind="checkpoint_mismatch",
                detail=f"a removed range starts at {beyond[0]}, after the last entry {self.last_seq}",
            )
        return self._head_problem()

    def _head_problem(self) -> Problem | None:
        expected = self.expected_head
        if expected is None:
            return None
        if expected.seq == 0:
            if expected.hash == GENESIS:
                return None
            return Problem(seq=0, kind="head_mismatch", detail=f"a head at entry 0 must be {GENESIS}")
        if expected.seq > self.last_seq:
            return Problem(
                seq=expected.seq,
                kind="head_mismatch",
                detail=f"the ledger ends at entry {self.last_seq} but the recorded head is entry "
                f"{expected.seq}: entries were removed from the end",
            )
        if self.head_hash_seen is None:
            return Problem(
                seq=expected.seq,
                kind="head_mismatch",
                detail=f"the recorded head entry {expected.seq} was removed by retention inside a "
                "larger range, so it cannot be compared; record a newer head",
            )
        if self.head_hash_seen != expected.hash:
            return Problem(
                seq=expected.seq,
                kind="head_mismatch",
                detail=f"entry {expected.seq} hashes to {_short(self.head_hash_seen)} but the recorded "
                f"head says {_short(expected.hash)}: the ledger was rewritten up to there",
            )
        return None


def _checkpoint_problem(
    ranges: Sequence[RemovedRange], latest_checkpoint: tuple[int, str] | None
) -> Problem | None:
    """The removed-range table must be the one the newest checkpoint vouches for."""
    if latest_checkpoint is None:
        if not ranges:
            return None
        first = min(ranges)
        return Problem(
            seq=first.first,
            kind="checkpoint_mismatch",
            detail=f"entries {first.first}..{first.last} are recorded as removed but no checkpoint "
            "entry vouches for any removal",
        )
    seq, body_text = latest_checkpoint
    try:
        body: Mapping[str, Any] = json.loads(body_text)
        recorded = body.get("ranges_digest")
    except (ValueError, AttributeError):
        recorded = None
    if recorded != ranges_digest(ranges):
        return Problem(
            seq=seq,
            kind="checkpoint_mismatch",
            detail=f"the removed-range table does not match checkpoint {seq}: ranges were added, "
            "changed or dropped after it was written",
        )
    return None


def verify_rows(
    rows: Iterable[Row],
    ranges: Sequence[RemovedRange],
    *,
    head: Head,
    latest_checkpoint: tuple[int, str] | None,
    expected_head: Head | None = None,
) -> VerifyReport:
    """Walk ``rows`` (ascending seq) and report the first bad entry, if any.

    ``latest_checkpoint`` is the newest checkpoint row's (seq, body text). An untouched ledger that
    retention trimmed passes; an edit, a deletion outside retention, a reordering or an inserted
    row is named. A truncated tail is found only against ``expected_head`` recorded earlier.
    """
    walk = _Walk(ranges, expected_head)
    found: Problem | None = None
    for row in rows:
        found = walk.step(row)
        if found is not None:
            break
    else:
        found = walk.after_last()
    table = _checkpoint_problem(ranges, latest_checkpoint)
    if table is not None and (found is None or table.seq < found.seq):
        found = table
    removed = sum(r.last - r.first + 1 for r in ranges)
    return VerifyReport(
        ok=found is None,
        checked=walk.checked,
        head=head,
        removed=removed,
        checkpoints=walk.checkpoints,
        problem=found,
    )
