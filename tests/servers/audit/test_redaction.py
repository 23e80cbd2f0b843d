"""Secrets never reach the ledger: entries and goals are redacted before they are written."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from servers.audit.goals import GoalRegistry
from shared.protocol.audit.bodies import ToolCallBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from tests.servers.audit.conftest import opened_ledger, turn

pytestmark = pytest.mark.anyio

PIN = "4711"
PASSWORD = "Tr0ub4dor3x"
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


DIGEST = re.compile(r"[0-9a-f]{12,}")
"""Hashes, goal ids and argument digests: random hex, which holds a four-digit PIN now and then."""


def _ledger_text(path: Path) -> str:
    """Everything written to the ledger and goals tables, less the random hex of digests and ids."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT * FROM ledger").fetchall()
        rows += db.execute("SELECT * FROM goals").fetchall()
    return DIGEST.sub("<hex>", "\n".join(str(row) for row in rows))


async def test_no_secret_from_a_turn_a_tool_error_or_a_goal_is_written_to_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    said = f"Your PIN: {PIN}. The password is {PASSWORD} and the token {TOKEN}"
    async with opened_ledger(path) as ledger:
        goals = GoalRegistry(ledger, max_running=2)
        goal, _ = await goals.create(
            agent="nexo",
            kind="interactive",
            origin=Origin(source="channel:console"),
            prompt=f"my PIN is {PIN}",
        )
        await goals.update(goal.id, last_decision=said, outcome=said, status="done", reason=said)
        failed = ToolCallBody(
            tool="workspace__read_file",
            args_sha256=args_digest({}),
            duration_ms=1.0,
            outcome="error",
            error=said,
        )
        await ledger.append(
            [
                turn(goal.id, 1, decision=said),
                EntryDraft.of(failed, source="channel:console", agent="nexo", goal_id=goal.id, subject=said),
            ]
        )
        found = await ledger.search("REDACTED", limit=50)
    stored = _ledger_text(path)
    assert (PIN in stored, PASSWORD in stored, TOKEN in stored) == (False, False, False)
    assert "Your PIN: [REDACTED:pin-phrase]" in stored
    assert "[REDACTED:github-pat]" in stored
    assert len(found) >= 2
