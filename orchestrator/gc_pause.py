"""The cyclic garbage collector during a start: paused until the start is over, then the start frozen.

A start is mostly imports (the SDK, pydantic models, the daemon's modules): hundreds of thousands
of objects made and kept. Python's collector walks the young ones every 700 allocations and, as
they are promoted, the older ones: about 260 collections per `nexo run` start, a tenth to a third
of a second of CPU on the way to the first reply, freeing under a thousand objects. Paused, the
start makes no such walk; at the end what it made is frozen (moved out of every later collection,
which then also leaves the pages shared with forked children alone) and collection resumes.

The price: cyclic garbage made during the start is never freed. It is bounded by the start (the
objects it would have freed are a few hundred small ones).
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn collection off until :func:`resume` (nothing if it was already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume(*, freeze: bool) -> None:
    """Turn collection back on if :func:`pause` turned it off. ``freeze``: the start is over and
    what it made is kept (the daemon is ready); otherwise (a command that ended before that, such
    as a config error or ``--check-config``) nothing is frozen."""
    global _paused
    if not _paused:
        return
    _paused = False
    if freeze:
        gc.freeze()
    gc.enable()
