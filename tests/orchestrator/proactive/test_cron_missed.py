"""A sweep's missed slots of one entry are one ledger row that says how many, why and which."""

from __future__ import annotations

from orchestrator.proactive.cron import missed_detail
from shared.protocol.cron import MissedPayload


def _payload(count: int, slots: list[str], *, parked: bool = False) -> MissedPayload:
    return MissedPayload(
        entry_id="poller:main:inbox",
        binding="main",
        agent="main",
        kind="agent_turn",
        reason="downtime",
        slots=slots,
        count=count,
        parked=parked,
    )


def test_a_single_missed_slot_is_named() -> None:
    detail = missed_detail(_payload(1, ["2026-11-21T09:00:00+00:00"]))
    assert detail == "1 slot missed (downtime): 2026-11-21T09:00"


def test_many_missed_slots_are_counted_and_the_newest_listed() -> None:
    slots = [f"2026-11-21T{hour:02d}:00:00+00:00" for hour in range(10, 20)]
    detail = missed_detail(_payload(48, slots, parked=True))
    assert detail == (
        "48 slots missed (downtime), the newest: 2026-11-21T15:00, 2026-11-21T16:00, 2026-11-21T17:00, "
        "2026-11-21T18:00, 2026-11-21T19:00. The entry is parked: `nexo cron resume poller:main:inbox` "
        "starts it again"
    )
