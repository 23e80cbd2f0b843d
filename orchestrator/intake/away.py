"""The "while you were away" digest: when the operator writes after a long silence, they first get a
short summary of what happened meanwhile, built from the audit ledger, then the answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from orchestrator.mesh import ServerConnection
from orchestrator.proactive.digest import DIGEST_KINDS, build_digest, needs_digest
from shared.protocol.audit.entries import Entry
from shared.protocol.audit.methods import TailParams, TailRequest, TailResult
from shared.protocol.audit.terms import MAX_TAIL

logger = logging.getLogger("nexo.intake")

TIMEOUT_S = 15.0


class AwayDigest:
    def __init__(
        self,
        audit: ServerConnection | None,
        operator_channel: str,
        after_s: float,
        operator_chat: str = "",
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._audit = audit
        self._source = f"channel:{operator_channel}"
        self._operator = (operator_channel, operator_chat)
        self._after_s = after_s
        self._clock = clock
        self._last: datetime | None = None

    async def seed(self) -> None:
        """The operator's last message before this process started, from the ledger."""
        if self._audit is None or self._after_s <= 0:
            return
        try:
            found = await self._audit.request(
                TailRequest(params=TailParams(kind="channel", source=self._source, limit=50)),
                TailResult,
                timeout=TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001 -- without history there is simply no digest this time
            logger.info("no earlier operator message found in the ledger: %s", exc)
            return
        arrivals = [e for e in found.entries if e.body.get("direction") == "in"]
        if arrivals:
            self._last = datetime.fromisoformat(max(arrivals, key=lambda e: e.seq).at)

    async def before_answer(self) -> str | None:
        """Called for each owner message: the digest to send first, or None."""
        if self._after_s <= 0:
            return None
        now = self._clock()
        last, self._last = self._last, now
        if last is None or not needs_digest(last, now, self._after_s) or self._audit is None:
            return None
        try:
            entries = await self._absence(self._audit, last)
        except Exception as exc:  # noqa: BLE001 -- the answer matters more than the digest
            logger.warning("digest skipped: the audit ledger did not answer (%s)", exc)
            return None
        return build_digest(entries, since=last, now=now, operator=self._operator)

    async def _absence(self, audit: ServerConnection, since: datetime) -> list[Entry]:
        """Every entry a digest reads from ``since`` on, a page at a time (oldest first)."""
        entries: list[Entry] = []
        after: int | None = None
        while True:
            params = TailParams(since_at=since, since_seq=after, kinds=list(DIGEST_KINDS), limit=MAX_TAIL)
            page = await audit.request(TailRequest(params=params), TailResult, timeout=TIMEOUT_S)
            entries.extend(page.entries)
            if len(page.entries) < MAX_TAIL:
                return entries
            after = page.entries[-1].seq
