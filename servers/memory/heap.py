"""Handing freed heap pages back to the system.

glibc keeps the pages of memory it has freed for later allocations, and trims only the top of its
main heap on its own. After a burst of short-lived allocations (an embedding model unloaded, the
codes of a million vectors built from SQLite a chunk at a time, their int8 copies written to their
file), tens of megabytes of a process stay resident though nothing uses them: 31 MB of the memory
server at a million memories. ``malloc_trim`` returns them.
"""

from __future__ import annotations


def return_memory_to_the_system() -> None:
    """glibc keeps freed heap pages; malloc_trim hands them back (elsewhere this is a no-op)."""
    import ctypes  # here: a server that never needs it never imports it

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.malloc_trim(0)
