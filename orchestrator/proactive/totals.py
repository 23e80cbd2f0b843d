"""Running spend totals by id, bounded: the least recently used are dropped past ``MAX_TRACKED``."""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from orchestrator.proactive.spend import Spend

logger = logging.getLogger("nexo.proactive")

MAX_TRACKED = 10_000
"""Goals (and heartbeat runs) whose totals are kept; the least recently used beyond this are dropped."""


@dataclass
class Total:
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)
    """Models whose calls counted here had no price: the usd total is then unknown."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, spend: Spend, model: str) -> None:
        self.input_tokens += spend.input_tokens
        self.output_tokens += spend.output_tokens
        if spend.usd is None:
            self.unpriced.add(model)
        else:
            self.usd += spend.usd

    def spend(self) -> Spend:
        return Spend(self.input_tokens, self.output_tokens, None if self.unpriced else self.usd)


class Totals:
    """Totals by id, the least recently used dropped past MAX_TRACKED so memory stays bounded."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._by_id: OrderedDict[str, Total] = OrderedDict()

    def get(self, key: str) -> Total:
        total = self._by_id.get(key)
        if total is None:
            return Total()
        self._by_id.move_to_end(key)
        return total

    def add(self, key: str, spend: Spend, model: str) -> None:
        total = self._by_id.get(key)
        if total is None:
            total = self._by_id[key] = Total()
            if len(self._by_id) > MAX_TRACKED:
                dropped, _ = self._by_id.popitem(last=False)
                logger.warning(
                    "spend of %s %r no longer tracked: over %d open", self._kind, dropped, MAX_TRACKED
                )
        self._by_id.move_to_end(key)
        total.add(spend, model)

    def pop(self, key: str) -> None:
        self._by_id.pop(key, None)

    def clear(self) -> None:
        self._by_id.clear()
