"""Handing freed heap pages back to the system.

glibc keeps the pages of memory it has freed for later allocations, and trims only the top of its
main heap on its own. After a burst of short-lived allocations (an embedding model unloaded, the
codes of a million vectors built from SQLite a chunk at a time, their int8 copies written to their
file), tens of megabytes of a process stay resident though nothing uses them: 31 MB of the memory
server at a million memories. ``malloc_trim`` returns them.

Between those bursts a recall makes large temporaries of its own (the scan's distances, the
candidates' columns, the model's tensors) on several threads. glibc gives each thread that
allocates an arena of its own, keeps up to twice its moving mapping threshold (up to 64 MB) free at
the top of each heap, and that threshold rises with every mapped block freed: after 325 hybrid
recalls at a million the server held about 50 MB more than it used. ``keep_the_heap_small`` bounds
that at the start: two arenas, 2 MB kept free at a heap's top, and blocks of 4 MB or more mapped
(below that a recall's temporaries are reused from the heap, not mapped and faulted in each time:
with 256 KB, each recall paid about 3 ms in page faults).
"""

from __future__ import annotations

from typing import Any

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
"""mallopt's parameter numbers (malloc.h); setting either threshold ends glibc's moving them."""
SETTINGS = ((M_ARENA_MAX, 2), (M_TRIM_THRESHOLD, 2 * 1024 * 1024), (M_MMAP_THRESHOLD, 4 * 1024 * 1024))
"""What ``keep_the_heap_small`` sets, in order."""


def _libc() -> Any | None:
    import ctypes  # here: a server that never needs it never imports it

    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def return_memory_to_the_system() -> None:
    """glibc keeps freed heap pages; malloc_trim hands them back (elsewhere this is a no-op)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def keep_the_heap_small() -> bool:
    """Bound what glibc keeps freed (``SETTINGS``), for good; False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    applied = [libc.mallopt(parameter, value) for parameter, value in SETTINGS]  # each, whatever the others
    return all(applied)
