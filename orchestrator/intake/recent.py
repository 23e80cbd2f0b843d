"""A bounded memory of message keys seen recently: how pushes from channels that keep no event log
(Claude Code channels) are answered once, however often the platform or the server repeats them."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

WINDOW_S = 24 * 3600.0
"""As long as the platforms keep redelivering an unconfirmed update (Telegram: 24 h)."""
MAX_KEYS = 10_000


class RecentKeys:
    """Keys seen within ``window_s``, at most ``limit`` of them (the oldest are forgotten first)."""

    def __init__(
        self,
        window_s: float = WINDOW_S,
        limit: int = MAX_KEYS,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s <= 0 or limit < 1:
            raise ValueError("window_s must be > 0 and limit >= 1")
        self._window_s = window_s
        self._limit = limit
        self._clock = clock
        self._seen: OrderedDict[Hashable, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def repeat(self, key: Hashable) -> bool:
        """True when ``key`` was seen within the window; otherwise remember it and return False."""
        now = self._clock()
        while self._seen and now - next(iter(self._seen.values())) >= self._window_s:
            self._seen.popitem(last=False)
        if key in self._seen:
            return True
        self._seen[key] = now
        if len(self._seen) > self._limit:
            self._seen.popitem(last=False)
        return False
