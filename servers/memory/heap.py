"""Handing freed heap pages back to the system.

glibc keeps the pages of memory it has freed for later allocations, and trims only the top of its
main heap on its own. After a burst of short-lived allocations (an embedding model unloaded, the
codes of a million vectors built from SQLite a chunk at a time, their int8 copies written to their
file), tens of megabytes of a process stay resident though nothing uses them: 31 MB of the memory
server at a million memories. ``malloc_trim`` returns them.

Between those bursts a recall makes large temporaries of its own (the scan's distances, the
candidates' columns, the model's tensors). glibc maps a block of more than its threshold and unmaps
it when freed, but raises that threshold to the size of every mapped block freed (up to 32 MB), so
after the first few recalls those temporaries came from the heap and their pages stayed there:
about 40 MB more after 325 recalls at a million. ``keep_large_blocks_mapped`` fixes the threshold.
"""

from __future__ import annotations

from typing import Any

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number for the mapping threshold (malloc.h); setting it ends the raising."""
MAPPED_FROM_BYTES = 256 * 1024
"""Blocks of at least this many bytes are mapped and handed back when freed."""


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


def keep_large_blocks_mapped() -> bool:
    """Map every block of ``MAPPED_FROM_BYTES`` or more, for good; False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MAPPED_FROM_BYTES))
