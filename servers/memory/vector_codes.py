"""Sign-bit codes of unit vectors, one agent's codes in memory, and the numpy kernels that search them.

A code keeps one bit per dimension (set when the component is positive), padded with zero bits to
whole 64-bit words: 48 bytes for 384 dimensions. Searching is two cheap stages over the codes:

1. Hamming distance between the query's code and every code (XOR + popcount, one 64-bit column at a
   time in cache-sized chunks), then the `m` smallest. Distances are small integers, so a histogram
   finds the cut-off faster than a partial sort, and a histogram of every 64th distance estimates it:
   one pass keeps the distances up to that estimate, and the exact cut-off is counted among those
   few (4-5 ms for a histogram of a million distances, 1.4 ms so).
2. For those `m`, an asymmetric score: the float query against each code's signs, summed through one
   256-entry table per code byte, one byte position at a time over the gathered columns (a gather
   and a table lookup per byte: 0.8 ms for 6,400 codes, 3 to 7 ms as one fancy-indexed gather of
   every byte of every code). It ranks far better than Hamming distance, so the exact rerank that
   follows (float32 vectors read from SQLite) needs few rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from servers.memory.errors import VectorDimensionError
from servers.memory.vector_file import NO_RECORD, Q8File

__all__ = [
    "CodeBlock",
    "Snapshot",
    "VectorDimensionError",
    "asymmetric_scores",
    "codes_from_blobs",
    "dimension_error",
    "hamming_distances",
    "sign_codes",
    "smallest",
    "unit_matrix",
    "words_for",
]

WORD_BITS = 64
_CHUNK = 65_536  # rows per pass: the temporaries stay in the CPU cache
_GROUP = 3
"""Words whose popcounts (at most 64 each) are summed in 8 bits before widening."""
SAMPLE_ABOVE = 65_536
"""Past this many distances, `smallest` estimates its cut-off from a sample (module docstring)."""
SAMPLE_STRIDE = 64


@cache
def _byte_signs() -> np.ndarray:
    """Row v: the signs (+1/-1) of the 8 bits of byte value v, most significant first as np.packbits packs."""
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, np.newaxis], axis=1)
    return np.asarray(bits.astype(np.float32) * 2 - 1, dtype=np.float32)


def words_for(dim: int) -> int:
    return -(-dim // WORD_BITS)


def dimension_error(what: str, shape: tuple[int, ...], dim: int) -> VectorDimensionError:
    return VectorDimensionError(
        f"{what} has shape {shape}, expected ({dim},): the embedding model changed since the index was "
        "built. Fix: embed with the model the index was built for, or rebuild the vectors with "
        "`nexo memory reindex`"
    )


def unit_matrix(vectors: Sequence[np.ndarray], dim: int, names: Callable[[int], str]) -> np.ndarray:
    """`vectors` as a (n, dim) float32 matrix of unit rows; `names(i)` says what vector i is in errors."""
    for position, vector in enumerate(vectors):
        if np.shape(vector) != (dim,):
            raise dimension_error(names(position), np.shape(vector), dim)
    matrix = np.array(vectors, dtype=np.float32).reshape(len(vectors), dim)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    bad = np.flatnonzero(~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0))
    if bad.size:
        raise ValueError(f"{names(int(bad[0]))} is zero or not finite: it has no direction to compare")
    return np.asarray(matrix / norms, dtype=np.float32)


def sign_codes(unit: np.ndarray) -> np.ndarray:
    """(n, words) uint64 codes: bit i of a row is set when component i is positive."""
    n, dim = unit.shape
    packed = np.zeros((n, words_for(dim) * 8), dtype=np.uint8)
    packed[:, : -(-dim // 8)] = np.packbits(unit > 0, axis=1)
    return packed.view(np.uint64)


def codes_from_blobs(blobs: list[bytes], words: int) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), dtype=np.uint64).reshape(len(blobs), words)


def hamming_distances(columns: np.ndarray, query: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Distance from `query` (words,) to each code stored column-wise in `columns` (words, n), written
    into `out` (n,) uint16 when given.

    Each word's popcounts are summed in 8 bits, three words at a time (at most 192), and widened to
    16 bits once per group: adding 8-bit counts into a 16-bit total word by word made numpy cast
    every add (a million 384-bit codes took 11.7 ms of one core so, 6.4 to 7.4 ms this way).
    """
    words, n = columns.shape
    if out is None:
        out = np.empty(n, dtype=np.uint16)
    width = min(n, _CHUNK)
    scratch = np.empty(width, dtype=np.uint64)
    counts = np.empty(width, dtype=np.uint8)
    groups = np.empty((-(-words // _GROUP), width), dtype=np.uint8)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        size = stop - start
        for word in range(words):
            np.bitwise_xor(columns[word, start:stop], query[word], out=scratch[:size])
            group = groups[word // _GROUP, :size]
            if word % _GROUP == 0:
                np.bitwise_count(scratch[:size], out=group)
            else:
                np.bitwise_count(scratch[:size], out=counts[:size])
                np.add(group, counts[:size], out=group)
        total = out[start:stop]
        if len(groups) == 1:
            total[:] = groups[0, :size]
            continue
        np.add(groups[0, :size], groups[1, :size], out=total, dtype=np.uint16)
        for group in groups[2:]:
            np.add(total, group[:size], out=total)
    return out


def smallest(distances: np.ndarray, m: int) -> np.ndarray:
    """Positions of `m` smallest distances (ties at the cut-off broken by position), ascending."""
    if m >= distances.size:
        return np.arange(distances.size)
    if distances.size <= SAMPLE_ABOVE:
        return _smallest_counted(distances, m)
    # A histogram of every SAMPLE_STRIDE-th distance estimates the cut-off, with a margin, and the
    # exact cut-off is counted among the distances within it: the same positions as counting every
    # distance. Should fewer than `m` be within (a sample unlike the rest), every one is counted.
    sampled = np.cumsum(np.bincount(distances[::SAMPLE_STRIDE]))
    estimate = int(np.searchsorted(sampled, (m + m // 4) // SAMPLE_STRIDE + 1))
    within = np.flatnonzero(distances <= estimate)
    if within.size < m:
        return _smallest_counted(distances, m)
    return np.asarray(within[_smallest_counted(distances[within], m)], dtype=np.intp)


def _smallest_counted(distances: np.ndarray, m: int) -> np.ndarray:
    """`smallest` by a histogram of every distance."""
    if m >= distances.size:
        return np.arange(distances.size)
    cutoff = int(np.searchsorted(np.cumsum(np.bincount(distances)), m))
    within = np.flatnonzero(distances <= cutoff)
    surplus = within.size - m
    if surplus:
        at_cutoff = np.flatnonzero(distances[within] == cutoff)
        keep = np.ones(within.size, dtype=bool)
        keep[at_cutoff[at_cutoff.size - surplus :]] = False
        within = within[keep]
    return within


def asymmetric_scores(columns: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The float `query` dotted with the signs (+1/-1) of each code stored column-wise in `columns`
    (words, m): higher is nearer."""
    words, m = columns.shape
    n_bytes = words * 8
    padded = np.zeros(n_bytes * 8, dtype=np.float32)
    padded[: query.size] = query
    # table[b, v]: the dot product of the 8 query components of byte b with the signs of value v.
    table = padded.reshape(n_bytes, 8) @ _byte_signs().T
    # Byte b of a code, as sign_codes packed it, is byte b % 8 of word b // 8 in memory.
    as_bytes = np.ascontiguousarray(columns).view(np.uint8).reshape(words, m, 8)
    scores = np.zeros(m, dtype=np.float32)
    for byte in range(n_bytes):
        scores += table[byte].take(as_bytes[byte // 8, :, byte % 8])
    return scores


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One moment of an agent's codes: later writes never change its ids (a replaced code may change)."""

    ids: np.ndarray  # (n,) int64, ascending
    columns: np.ndarray  # (words, n) uint64
    slots: np.ndarray
    """(n,) int32: each vector's record in ``q8`` (``NO_RECORD``: none; read its copy from SQLite)."""
    q8: Q8File | None
    """The file of the int8 copies (``vector_file``), while there is one."""

    def q8_slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, slots) of those of ``ids`` whose int8 copy is in ``q8``, in the order given."""
        if self.q8 is None or not self.ids.size:
            return ids[:0], np.empty(0, dtype=np.int64)
        positions = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
        slots = self.slots[positions]
        there = (self.ids[positions] == ids) & (slots != NO_RECORD)
        return ids[there], slots[there]

    def q8_slots_at(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``q8_slots`` of the ids at ``positions`` of this snapshot: no search for them (a search
        of a million ids, cold in the CPU's cache, took 0.3 ms for 300 of them)."""
        if self.q8 is None:
            return self.ids[:0], np.empty(0, dtype=np.int64)
        slots = self.slots[positions]
        there = slots != NO_RECORD
        return self.ids[positions[there]], slots[there]

    def scan(self, query: np.ndarray, start: int, stop: int, out: np.ndarray) -> None:
        """The Hamming distances of codes `start:stop` from the unit `query`'s code, into `out[start:stop]`
        (a search splits its scan between threads so)."""
        code = sign_codes(query[np.newaxis, :])[0]
        hamming_distances(self.columns[:, start:stop], code, out[start:stop])

    def candidates(
        self,
        query: np.ndarray,
        first: int,
        keep: int,
        exclude: Collection[int],
        distances: np.ndarray | None = None,
    ) -> np.ndarray:
        """Positions (in this snapshot) of about `keep` codes nearest to the unit `query`: `first` by
        Hamming, then rescored.

        `distances`: every code's Hamming distance from the query, when scanned already (`scan`).
        """
        if distances is None:
            distances = hamming_distances(self.columns, sign_codes(query[np.newaxis, :])[0])
        excluded = np.fromiter(exclude, dtype=np.int64, count=len(exclude))
        positions = smallest(distances, first + excluded.size)
        if excluded.size:
            positions = positions[~np.isin(self.ids[positions], excluded)]
        if positions.size > keep:
            scores = asymmetric_scores(self.columns[:, positions], query)
            positions = positions[np.argpartition(-scores, keep)[:keep]]
        return np.asarray(positions, dtype=np.intp)


class CodeBlock:
    """The codes of one agent, kept sorted by memory id, column-wise for the Hamming kernel, with
    each vector's slot in the file of its int8 copies (``q8``, once there is one)."""

    __slots__ = ("_columns", "_ids", "_size", "_slots", "q8")

    def __init__(self, words: int) -> None:
        self._ids = np.empty(0, dtype=np.int64)
        self._columns = np.empty((words, 0), dtype=np.uint64)
        self._slots = np.empty(0, dtype=np.int32)
        self._size = 0
        self.q8: Q8File | None = None

    def __len__(self) -> int:
        return self._size

    def snapshot(self) -> Snapshot:
        size = self._size
        return Snapshot(self._ids[:size], self._columns[:, :size], self._slots[:size], self.q8)

    def upsert(self, ids: np.ndarray, codes: np.ndarray, slots: np.ndarray | None = None) -> None:
        """Insert or replace codes (ids unique, any order) keeping the ids sorted; ``slots``: their
        int8 copies' records in ``q8`` (none: their copies are read from SQLite)."""
        order = np.argsort(ids, kind="stable")
        ids, codes = ids[order], codes[order]
        slots = (
            np.full(ids.size, NO_RECORD, dtype=np.int32) if slots is None else slots.astype(np.int32)[order]
        )
        current = self._ids[: self._size]
        positions = np.searchsorted(current, ids)
        present = positions < self._size
        present[present] = current[positions[present]] == ids[present]
        # Replacing writes in place: a snapshot taken before may see the old or the new code of
        # that id, never another id's, and the old record stays as it was (records are appended).
        self._columns[:, positions[present]] = codes[present].T
        self._slots[positions[present]] = slots[present]
        ids, codes, slots = ids[~present], codes[~present], slots[~present]
        if not ids.size:
            return
        if not self._size or ids[0] > current[-1]:
            self._append(ids, codes, slots)
            return
        merged_ids = np.concatenate([current, ids])
        merged = np.concatenate([self._columns[:, : self._size], codes.T], axis=1)
        order = np.argsort(merged_ids, kind="stable")
        # New arrays: snapshots taken before keep the old ones.
        self._ids, self._columns, self._slots, self._size = (
            merged_ids[order],
            np.ascontiguousarray(merged[:, order]),
            np.concatenate([self._slots[: self._size], slots])[order],
            order.size,
        )

    def discard(self, ids: np.ndarray) -> None:
        """Remove these ids where present (absent ones are ignored)."""
        present = self.positions(ids)
        if not present.size:
            return
        keep = np.ones(self._size, dtype=bool)
        keep[present] = False
        # New arrays: snapshots taken before keep the old ones.
        self._ids = self._ids[: self._size][keep]
        self._columns = np.ascontiguousarray(self._columns[:, : self._size][:, keep])
        self._slots = self._slots[: self._size][keep]
        self._size = self._ids.size

    def without_record(self, ids: np.ndarray) -> np.ndarray:
        """Those of ``ids`` this block holds with no record in ``q8`` yet."""
        positions = self.positions(ids)
        return np.asarray(self._ids[positions[self._slots[positions] == NO_RECORD]], dtype=np.int64)

    def set_slots(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Point these ids (each one held by this block) at their records in ``q8``, row for row."""
        self._slots[np.searchsorted(self._ids[: self._size], ids)] = slots

    def forget_records(self) -> None:
        """No record in ``q8`` holds anything of this block any more (the file was given up)."""
        self.q8 = None
        self._slots = np.full(self._ids.size, NO_RECORD, dtype=np.int32)  # new: snapshots keep theirs

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Positions of those of `ids` this block holds."""
        current = self._ids[: self._size]
        positions = np.searchsorted(current, ids)
        inside = positions < self._size
        positions = positions[inside]
        return np.asarray(positions[current[positions] == ids[inside]], dtype=np.intp)

    def _append(self, ids: np.ndarray, codes: np.ndarray, slots: np.ndarray) -> None:
        needed = self._size + ids.size
        if needed > self._ids.size:
            capacity = max(needed, int(self._ids.size * 1.5), 1024)
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_ids[: self._size] = self._ids[: self._size]
            grown = np.empty((self._columns.shape[0], capacity), dtype=np.uint64)
            grown[:, : self._size] = self._columns[:, : self._size]
            grown_slots = np.full(capacity, NO_RECORD, dtype=np.int32)
            grown_slots[: self._size] = self._slots[: self._size]
            self._ids, self._columns, self._slots = grown_ids, grown, grown_slots
        # Written past the current size, so no snapshot taken before sees them.
        self._ids[self._size : needed] = ids
        self._columns[:, self._size : needed] = codes.T
        self._slots[self._size : needed] = slots
        self._size = needed
