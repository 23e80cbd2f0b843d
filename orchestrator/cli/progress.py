"""A progress line on stderr for long operator commands (memory export, import, reindex)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``label done/total (pct) rate/s`` on stderr; redrawn in place on a terminal, one line per
    update otherwise (so logs of scripted runs stay readable); nothing when ``quiet``."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        unit: str = "records",
        quiet: bool = False,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self._stream = stream or sys.stderr
        self._started = time.monotonic()
        self._tty = self._stream.isatty()
        self._quiet = quiet

    def update(self, done: int) -> None:
        if self._quiet:
            return
        elapsed = max(time.monotonic() - self._started, 1e-6)
        pct = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        text = f"{self.label} {done}/{self.total}{pct} {done / elapsed:.1f} {self.unit}/s"
        if self._tty:
            self._stream.write(f"\r\x1b[K{text}")
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._tty and not self._quiet:
            self._stream.write("\n")
            self._stream.flush()
