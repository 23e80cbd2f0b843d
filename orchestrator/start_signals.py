"""Ctrl-C and SIGTERM while ``nexo run`` starts: noted, never raised in the middle of a statement.

Python's own Ctrl-C raises ``KeyboardInterrupt`` at whatever bytecode runs, and a start is mostly
imports, a fork and the event loop's first steps. Raised inside a half-run import or a finaliser it
can be swallowed or leave the interpreter to die of SIGINT at exit; raised after the event loop
starts, asyncio cancels the main task, which a shielded step of the start absorbs. So from the first
line a person sees until the orchestrator's own signal handling is in place, the signal is only
noted here; each stage of the start asks :func:`requested` and stops cleanly, and the orchestrator
asks once its handling is in place. A second Ctrl-C while a stage blocks raises as before: the
person insists.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)

_noted: list[int] = []


def _note(signum: int, _frame: FrameType | None) -> None:
    if _noted and signum == signal.SIGINT:
        raise KeyboardInterrupt
    _noted.append(signum)


@contextmanager
def noted() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM are noted for :func:`requested`, not raised; the
    previous handlers are back after it."""
    previous: dict[int, Any] = {signum: signal.getsignal(signum) for signum in SIGNALS}
    _noted.clear()
    for signum in SIGNALS:
        signal.signal(signum, _note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _noted.clear()


def requested() -> int | None:
    """The first signal noted since :func:`noted` began, or None."""
    return _noted[0] if _noted else None
