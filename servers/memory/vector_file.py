"""The int8 copies of one agent's vectors (``vector_q8``) in an unnamed file, read by ``pread``.

A search's rerank and a hybrid recall's keyword candidates bound hundreds of cosines per question
from the int8 copies. Read from SQLite by primary key, 600 copies took 8.9 ms at a million
memories (a B-tree descent and a page copy per row); read by ``pread`` from a file of fixed-size
records, 1.8 ms. Held in this process's memory instead, a million copies would add 400 MB to it;
mapped (``mmap``), every page a question touched would count in its PSS as well. Read by ``pread``,
they stay in the page cache, shared and reclaimable, and out of the server's own memory.

The file is a cache with no name (``O_TMPFILE``: nothing is left behind by a crash), in the store's
own directory, rebuilt from SQLite each time the server loads its codes (``vector_cache``).
Records are only ever appended: a vector replaced gets a new record, and a search that took its
snapshot before still reads the old one, intact. A record is the ``dim`` int8 components, then
the scale and the error bound as float64, as SQLite holds them (``vector_q8``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np

Copies = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(q (n, dim) int8, scale, error) of n vectors' int8 copies (``vector_q8.quantized``)."""
NO_RECORD = -1
"""The slot of a vector whose copy is not in the file: read from SQLite."""
_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)
"""What ``open(O_TMPFILE)`` fails with where the kernel or the filesystem lacks it."""
_SCALARS = np.dtype([("scale", "<f8"), ("error", "<f8")])


class Q8File:
    """Fixed-size records appended to an unnamed file; a record's slot is its position."""

    def __init__(self, directory: Path, dim: int) -> None:
        """Raises OSError when the directory takes no file (read-only, full, gone)."""
        self.dim = dim
        self.record = dim + _SCALARS.itemsize
        self._fd = _unnamed_file(directory)
        # Closed when the last holder lets go: a search's snapshot may outlive its block's use of it.
        weakref.finalize(self, os.close, self._fd)
        self.records = 0
        """Records written, stale ones included (the next slot)."""

    def append(self, q: np.ndarray, scale: np.ndarray, error: np.ndarray) -> np.ndarray:
        """Write one record per row of ``q`` (n, dim) int8; their slots. Raises OSError (a full
        disk): nothing written counts then, and the file should be given up."""
        n = q.shape[0]
        records = np.empty((n, self.record), dtype=np.uint8)
        records[:, : self.dim] = q.view(np.uint8)
        scalars = np.empty(n, dtype=_SCALARS)
        scalars["scale"], scalars["error"] = scale, error
        records[:, self.dim :] = scalars.view(np.uint8).reshape(n, _SCALARS.itemsize)
        data = records.data.cast("B")
        offset = self.records * self.record
        while data:
            written = os.pwrite(self._fd, data, offset)
            data, offset = data[written:], offset + written
        first, self.records = self.records, self.records + n
        return np.arange(first, self.records, dtype=np.int64)

    def read(self, slots: np.ndarray) -> Copies:
        """(q (n, dim) int8, scale, error) of these slots, one ``pread`` each, in the order given."""
        size = self.record
        data = b"".join([os.pread(self._fd, size, slot * size) for slot in slots.tolist()])
        if len(data) != size * slots.size:
            raise OSError(f"the int8 copies' file ended early ({len(data)} of {size * slots.size} bytes)")
        records = np.frombuffer(data, dtype=np.uint8).reshape(slots.size, size)
        scalars = np.ascontiguousarray(records[:, self.dim :]).view(_SCALARS).reshape(slots.size)
        return records[:, : self.dim].view(np.int8), scalars["scale"], scalars["error"]


def copies_of(rows: list[tuple[Any, ...]], dim: int) -> tuple[np.ndarray, Copies]:
    """(ids, copies) of SQLite rows whose first column is the memory id and whose last three are
    the scale, the error and ``q``, as ``memory_vectors_q8`` holds them."""
    if not rows:
        return np.empty(0, dtype=np.int64), (np.empty((0, dim), dtype=np.int8), np.empty(0), np.empty(0))
    # One pass splits the rows into columns (four generator passes took twice as long).
    columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True))
    q = np.frombuffer(b"".join(columns[-1]), dtype=np.int8).reshape(len(rows), dim)
    return np.array(columns[0], dtype=np.int64), (
        q,
        np.array(columns[-3], dtype=np.float64),
        np.array(columns[-2], dtype=np.float64),
    )


def _unnamed_file(directory: Path) -> int:
    """A descriptor of a new file in ``directory`` that no path names (mode 0600)."""
    unnamed = getattr(os, "O_TMPFILE", None)
    if unnamed is not None:
        try:
            return os.open(directory, unnamed | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno not in _NO_TMPFILE:
                raise
    # A system or filesystem without O_TMPFILE: a named file, unlinked at once.
    fd, path = tempfile.mkstemp(dir=directory, prefix=".memory-q8-")
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()
    return fd
