"""Tampering done directly in the SQLite file, and what ``verify`` says about it.

Detected: an edited body or hash, a row deleted in the middle (also next to a retention gap), rows
swapped (reordered), a forged row inside a removed range or with a made-up hash, an edited
removed-range table. Not detectable from the file alone: rows cut from the end and a chain an
attacker recomputed after an edit. Both are caught against a head (seq, hash) recorded elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servers.audit.chain import canonical_entry, entry_hash
from servers.audit.retention import Retention
from servers.audit.store import verify_file
from shared.protocol.audit.entries import Head, Problem, VerifyReport
from tests.servers.audit.conftest import ManualClock, notice, opened_ledger, rows, tamper, tool_call, turn

pytestmark = pytest.mark.anyio


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


async def build(path: Path, count: int = 8) -> Head:
    """A ledger of ``count`` notices; returns its head."""
    async with opened_ledger(path) as ledger:
        await ledger.append([notice(f"n{i}") for i in range(1, count + 1)])
        return await ledger.head()


def problem(path: Path, expected_head: Head | None = None) -> Problem | None:
    return verify_file(path, expected_head).problem


def where(found: Problem | None) -> tuple[int, str] | None:
    return None if found is None else (found.seq, found.kind)


def recompute_chain(path: Path) -> None:
    """What an attacker who understands the format does after an edit: rehash everything after it."""
    stored = rows(
        path,
        "SELECT seq, at, kind, source, agent, goal_id, subject, body, prev_hash FROM ledger ORDER BY seq",
    )
    prev = stored[0][8]
    updates: list[tuple[str, tuple[object, ...]]] = []
    for seq, at, kind, source, agent, goal_id, subject, body, _ in stored:
        hash_ = entry_hash(
            prev, canonical_entry(seq, at, kind, source, agent, goal_id, subject, json.loads(body))
        )
        updates.append(("UPDATE ledger SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, hash_, seq)))
        prev = hash_
    tamper(path, *updates)


async def test_an_untouched_ledger_verifies(db_path: Path) -> None:
    head = await build(db_path)
    assert verify_file(db_path, head) == VerifyReport(ok=True, checked=8, head=head, removed=0, checkpoints=0)


async def test_an_untouched_ledger_that_retention_trimmed_several_times_verifies(
    db_path: Path, clock: ManualClock
) -> None:
    reports: list[tuple[bool, int, int]] = []
    async with opened_ledger(db_path, clock) as ledger:
        retention = Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0)
        for index in range(6):
            await ledger.append(
                [turn("g-1", index), tool_call("g-1"), turn("g-2", index), notice(f"tick {index}")]
            )
            if index % 2:
                await retention.trim()
                report = await ledger.verify()
                reports.append((report.ok, report.removed, report.checkpoints))
        clock.advance(hours=2)
        await ledger.append([notice("recent")])
        await retention.trim(max_age_s=3600)
        final = await ledger.verify(await ledger.head())
    assert reports == [(True, 0, 0), (True, 6, 1), (True, 12, 2)]
    assert (final.ok, final.checked, final.removed, final.checkpoints) == (True, 2, 26, 1)


async def test_an_edited_body_is_a_hash_mismatch_at_that_entry(db_path: Path) -> None:
    await build(db_path)
    tamper(
        db_path,
        """UPDATE ledger SET body = '{"level":"info","limit":null,"message":"edited"}' WHERE seq = 4""",
    )
    found = problem(db_path)
    assert found is not None
    assert where(found) == (4, "hash_mismatch")
    assert found.detail.startswith("entry 4 (notice) was edited: its content does not match its hash")


async def test_a_body_that_is_no_longer_json_is_named_as_such(db_path: Path) -> None:
    await build(db_path)
    tamper(db_path, "UPDATE ledger SET body = 'garbage' WHERE seq = 2")
    found = problem(db_path)
    assert found is not None
    assert found.detail.startswith("entry 2 (notice) was edited: its body is not valid JSON")


async def test_an_edited_hash_is_a_hash_mismatch_at_that_entry(db_path: Path) -> None:
    await build(db_path)
    tamper(db_path, f"UPDATE ledger SET hash = '{'f' * 64}' WHERE seq = 5")
    assert where(problem(db_path)) == (5, "hash_mismatch")


async def test_a_row_deleted_in_the_middle_is_a_seq_gap(db_path: Path) -> None:
    await build(db_path)
    tamper(db_path, "DELETE FROM ledger WHERE seq = 3")
    assert problem(db_path) == Problem(
        seq=3,
        kind="seq_gap",
        detail="entry 3 is missing (the next entry present is 4) and no retention checkpoint records its "
        "removal: it was deleted outside retention",
    )


async def test_rows_cut_from_the_end_are_found_only_against_a_recorded_head(db_path: Path) -> None:
    head = await build(db_path)
    tamper(db_path, "DELETE FROM ledger WHERE seq > 6")
    assert problem(db_path) is None
    assert problem(db_path, head) == Problem(
        seq=8,
        kind="head_mismatch",
        detail="the ledger ends at entry 6 but the recorded head is entry 8: "
        "entries were removed from the end",
    )


async def test_two_rows_with_swapped_seqs_break_the_link_at_the_first(db_path: Path) -> None:
    await build(db_path)
    tamper(
        db_path,
        "UPDATE ledger SET seq = -1 WHERE seq = 3",
        "UPDATE ledger SET seq = 3 WHERE seq = 6",
        "UPDATE ledger SET seq = 6 WHERE seq = -1",
    )
    assert where(problem(db_path)) == (3, "prev_link_broken")


async def test_a_forged_row_with_a_made_up_hash_is_a_hash_mismatch(db_path: Path) -> None:
    head = await build(db_path)
    forged = (
        9,
        "2026-11-21T13:00:00.000000+00:00",
        "notice",
        "cli",
        "",
        None,
        "forged",
        "{}",
        head.hash,
        "a" * 64,
    )
    tamper(db_path, ("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)", forged))
    assert where(problem(db_path)) == (9, "hash_mismatch")


async def test_a_forged_row_inside_a_removed_range_is_named(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", i) for i in range(5)])
        await Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0).trim()
    forged = (
        2,
        "2026-11-21T12:00:00.000001+00:00",
        "notice",
        "cli",
        "",
        None,
        "forged",
        "{}",
        "0" * 64,
        "1" * 64,
    )
    tamper(db_path, ("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)", forged))
    assert where(problem(db_path)) == (2, "checkpoint_mismatch")


async def test_a_row_deleted_next_to_a_retention_gap_is_still_a_seq_gap(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", i) for i in range(5)])
        await Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0).trim()
    tamper(db_path, "DELETE FROM ledger WHERE seq = 4")
    assert where(problem(db_path)) == (4, "seq_gap")


async def test_widening_the_removed_range_table_to_hide_a_deletion_breaks_the_checkpoint(
    db_path: Path,
) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", i) for i in range(5)])
        await Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0).trim()
    [(last_hash,)] = rows(db_path, "SELECT hash FROM ledger WHERE seq = 4")
    tamper(
        db_path,
        "DELETE FROM ledger WHERE seq = 4",
        ("UPDATE removed_ranges SET last_seq = 4, last_hash = ? WHERE first_seq = 1", (last_hash,)),
    )
    found = problem(db_path)
    assert where(found) == (6, "checkpoint_mismatch")
    assert found is not None
    assert found.detail.startswith("the removed-range table does not match checkpoint 6")


async def test_deleting_the_only_checkpoint_leaves_its_ranges_unvouched(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", i) for i in range(5)])
        await Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0).trim()
        await ledger.append([notice("after")])
    tamper(db_path, "DELETE FROM ledger WHERE kind = 'checkpoint'")
    assert where(problem(db_path)) == (1, "checkpoint_mismatch")


async def test_a_recomputed_chain_passes_alone_but_not_against_a_recorded_head(db_path: Path) -> None:
    head = await build(db_path)
    tamper(
        db_path,
        """UPDATE ledger SET body = '{"level":"info","limit":null,"message":"rewritten"}' WHERE seq = 2""",
    )
    recompute_chain(db_path)
    found = problem(db_path, head)
    assert problem(db_path) is None
    assert where(found) == (8, "head_mismatch")
    assert found is not None
    assert found.detail.endswith("the ledger was rewritten up to there")


async def test_a_correctly_chained_row_appended_at_the_end_cannot_be_told_from_a_real_one(
    db_path: Path,
) -> None:
    """The chain proves nothing was changed before the head; who wrote the newest entries is up to
    the file's permissions (0600, owned by the server's user)."""
    head = await build(db_path)
    body = {"level": "info", "limit": None, "message": "forged"}
    at = "2026-11-21T13:00:00.000000+00:00"
    hash_ = entry_hash(head.hash, canonical_entry(9, at, "notice", "cli", "", None, "", body))
    forged = (9, at, "notice", "cli", "", None, "", json.dumps(body), head.hash, hash_)
    tamper(db_path, ("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)", forged))
    assert (problem(db_path), problem(db_path, head)) == (None, None)
