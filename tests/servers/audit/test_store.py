"""The ledger store, the group-commit writer and retention, on real SQLite files."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import TaskStatus

from servers.audit.chain import GENESIS, RemovedRange, canonical_entry, entry_hash
from servers.audit.committer import GroupCommitter
from servers.audit.drafts import CheckpointBody
from servers.audit.errors import InvalidEntry, InvalidRequest, WriterStopped
from servers.audit.retention import Retention, TrimOutcome
from servers.audit.store import ChainWriter, Ledger, fts_query, verify_file
from shared.protocol.audit.entries import Appended, Entry, EntryDraft, Head, VerifyReport
from tests.servers.audit.conftest import (
    START,
    ManualClock,
    answer,
    notice,
    opened_ledger,
    rows,
    tool_call,
    turn,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "audit.db"


@asynccontextmanager
async def writer_running(committer: GroupCommitter) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        await tg.start(committer.run)
        yield
        tg.cancel_scope.cancel()


def at(microseconds: int) -> str:
    return START.replace(microsecond=microseconds).isoformat(timespec="microseconds")


# -- appending -------------------------------------------------------------------------------------


async def test_appends_get_consecutive_seqs_each_linked_to_the_previous_hash(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        appended = await ledger.append([notice("boot"), tool_call("g-1")])
        entries = await ledger.tail()
    body = {"level": "info", "limit": None, "message": "boot"}
    first_hash = entry_hash(GENESIS, canonical_entry(1, at(0), "notice", "heartbeat", "", None, "boot", body))
    assert appended[0] == Appended(seq=1, hash=first_hash, at=at(0), created=True)
    assert entries[0] == Entry(
        seq=1,
        at=at(0),
        kind="notice",
        source="heartbeat",
        agent="",
        goal_id=None,
        subject="boot",
        body=body,
        prev_hash=GENESIS,
        hash=first_hash,
    )
    assert (entries[1].seq, entries[1].prev_hash, entries[1].hash) == (2, first_hash, appended[1].hash)
    assert entries[1].body == {
        "args_sha256": tool_call(None).body["args_sha256"],
        "call_id": None,
        "duration_ms": 2.5,
        "error": None,
        "outcome": "ok",
        "tool": "time__now",
    }


async def test_a_repeated_turn_returns_the_recorded_entry_and_adds_no_row(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        [first] = await ledger.append([turn("g-1", 0)])
        again = await ledger.append([turn("g-1", 0, decision="a retry says something else"), turn("g-2", 0)])
        twice_in_one_batch = await ledger.append([turn("g-3", 0), turn("g-3", 0)])
    assert again[0] == first.model_copy(update={"created": False})
    assert again[1].created
    assert twice_in_one_batch[1] == twice_in_one_batch[0].model_copy(update={"created": False})
    assert rows(db_path, "SELECT goal_id, turn_index FROM ledger ORDER BY seq") == [
        ("g-1", 0),
        ("g-2", 0),
        ("g-3", 0),
    ]


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        (EntryDraft(kind="telepathy", source="cli"), "unknown kind 'telepathy': use one of turn, tool_call"),
        (EntryDraft(kind="goal", source="cli", goal_id="g"), "kind 'goal' cannot be appended: goal entries"),
        (EntryDraft(kind="checkpoint", source="cli"), "kind 'checkpoint' cannot be appended: checkpoints"),
        (
            EntryDraft(kind="notice", source="Channel Console"),
            "source 'Channel Console' is not a source name",
        ),
        (
            EntryDraft(kind="channel", source="cron"),
            "a channel entry needs source 'channel:<server>'; got 'cron'",
        ),
        (EntryDraft(kind="notice", source="cli", agent="Nexo!"), "agent 'Nexo!' is not an agent id"),
        (EntryDraft(kind="notice", source="cli", goal_id="g 1"), "goal_id 'g 1' is not a goal id"),
        (
            EntryDraft(kind="turn", source="cli", body={"index": 0, "outcome": "done"}),
            "a turn entry needs a goal_id",
        ),
        (
            EntryDraft(kind="notice", source="cli", subject="x" * 501),
            "subject is 501 characters; keep it to 500",
        ),
        (
            EntryDraft(kind="turn", source="cli", goal_id="g", body={"index": -1, "outcome": "done"}),
            "invalid turn body: index: Input should be greater than or equal to 0",
        ),
        (
            EntryDraft(
                kind="tool_call",
                source="cli",
                body={
                    "tool": "t",
                    "args_sha256": "0" * 64,
                    "duration_ms": 1,
                    "outcome": "ok",
                    "arguments": {},
                },
            ),
            "invalid tool_call body: arguments: Extra inputs are not permitted",
        ),
    ],
)
async def test_a_bad_entry_is_refused_naming_the_problem(
    db_path: Path, draft: EntryDraft, message: str
) -> None:
    async with opened_ledger(db_path) as ledger:
        with pytest.raises(InvalidEntry) as caught:
            await ledger.append([draft])
    assert str(caught.value).startswith(message)


async def test_the_ledger_refuses_updates_and_deletes_that_do_not_come_from_retention(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([notice("one")])
    conn = sqlite3.connect(db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="the audit ledger is append-only"):
            conn.execute("UPDATE ledger SET subject = 'two'")
        with pytest.raises(sqlite3.IntegrityError, match="entries leave only through retention"):
            conn.execute("DELETE FROM ledger")
    finally:
        conn.close()


# -- reading ---------------------------------------------------------------------------------------


async def test_tail_filters_and_returns_the_newest_entries_oldest_first(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", 0), tool_call("g-1"), turn("g-2", 0), notice("hb"), turn("g-1", 1)])
        newest = await ledger.tail(limit=2)
        goal_turns = await ledger.tail(goal_id="g-1", kind="turn")
        heartbeat = await ledger.tail(source="heartbeat")
        after = await ledger.tail(since_seq=3, limit=1)
    assert [e.seq for e in newest] == [4, 5]
    assert [e.seq for e in goal_turns] == [1, 5]
    assert [e.seq for e in heartbeat] == [4]
    assert [e.seq for e in after] == [4]


async def test_tail_since_a_time_returns_every_later_entry_oldest_first_a_page_at_a_time(
    db_path: Path,
) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", n) for n in range(5)])
        everything = await ledger.tail(limit=10)
        since = datetime.fromisoformat(everything[2].at)
        later = await ledger.tail(since_at=since, limit=10)
        first_page = await ledger.tail(kind="turn", since_at=since, limit=2)
        next_page = await ledger.tail(kind="turn", since_at=since, since_seq=first_page[-1].seq, limit=2)
    assert [e.seq for e in later] == [3, 4, 5]
    assert [e.seq for e in first_page] == [3, 4]
    assert [e.seq for e in next_page] == [5]


async def test_search_matches_every_term_in_subject_or_body_newest_first(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append(
            [tool_call("g-1", "memory__search"), tool_call("g-2", "memory__search", outcome="denied")]
        )
        await ledger.append([notice('quota "hit": -1'), turn("g-1", 0)])
        both = await ledger.search("memory")
        denied = await ledger.search("memory denied")
        one_goal = await ledger.search("memory", goal_id="g-1", kind="tool_call", source="channel:console")
        odd = await ledger.search('"hit": -1')
    assert [e.seq for e in both] == [2, 1]
    assert [e.seq for e in denied] == [2]
    assert [e.seq for e in one_goal] == [1]
    assert [e.seq for e in odd] == [3]


def test_an_fts_query_quotes_every_term_and_refuses_an_empty_one() -> None:
    assert fts_query(' memory  "x" -y ') == '"memory" """x""" "-y"'
    with pytest.raises(InvalidRequest, match="query '  ' is empty"):
        fts_query("  ")


async def test_a_goal_is_known_from_the_registry_or_from_its_entries(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", 0)])
        known = [await ledger.knows_goal(goal) for goal in ("g-1", "g-9")]
    assert known == [True, False]


async def test_verify_walks_the_file_and_reports_the_head(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        empty = await ledger.verify()
        await ledger.append([notice("a"), notice("b")])
        head = await ledger.head()
        full = await ledger.verify(expected_head=head)
    assert empty == VerifyReport(ok=True, checked=0, head=Head(seq=0, hash=GENESIS), removed=0, checkpoints=0)
    assert full == VerifyReport(ok=True, checked=2, head=head, removed=0, checkpoints=0)
    assert verify_file(db_path) == full


# -- group commit ----------------------------------------------------------------------------------


async def test_concurrent_appends_share_commits_and_each_returns_after_its_own_commit(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(ledger, max_batch=64)
        seen_on_return: list[bool] = []

        async def append(i: int) -> None:
            [appended] = await committer.append([notice(f"n{i}")])
            # Another connection sees only committed rows: the entry is durable when append returns.
            seen_on_return.append(
                rows(db_path, "SELECT 1 FROM ledger WHERE seq = ?", (appended.seq,)) == [(1,)]
            )

        async with writer_running(committer), anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(append, i)
        report = await ledger.verify()
    assert seen_on_return == [True] * 50
    assert (committer.entries, report.ok, report.head.seq) == (50, True, 50)
    assert committer.batches < 50


async def test_the_commit_window_waits_for_more_appends_to_join_the_batch(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(ledger, max_batch=2, window_s=30.0)
        async with writer_running(committer), anyio.create_task_group() as tg:
            tg.start_soon(committer.append, [notice("first")])
            await wait_all_tasks_blocked()
            assert committer.batches == 0
            tg.start_soon(committer.append, [notice("second")])
    assert (committer.batches, committer.entries) == (1, 2)


async def test_an_expired_window_commits_what_it_has(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(ledger, max_batch=10, window_s=0.001)
        async with writer_running(committer):
            with anyio.fail_after(5):
                [appended] = await committer.append([notice("alone")])
    assert (appended.seq, committer.batches) == (1, 1)


class FailingLedger(Ledger):
    """A ledger whose every write transaction hits an SQLite error."""

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[ChainWriter]:
        async with super().writing() as writer:
            await writer.tx.execute("SELECT * FROM no_such_table")
            yield writer


async def test_a_failed_commit_raises_in_every_caller_of_the_batch_and_the_writer_goes_on(
    db_path: Path,
) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(FailingLedger(ledger.db), max_batch=10)
        errors: list[str] = []

        async def append() -> None:
            try:
                await committer.append([notice("x")])
            except sqlite3.OperationalError as exc:
                errors.append(str(exc))

        async with writer_running(committer), anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(append)
        async with writer_running(GroupCommitter(FailingLedger(ledger.db))):
            pass
    assert errors == ["no such table: no_such_table"] * 3


async def test_a_bad_draft_is_refused_before_it_is_queued(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(ledger)
        with pytest.raises(InvalidEntry):
            await committer.append([EntryDraft(kind="nope", source="cli")])
        assert committer.batches == 0


async def test_appends_waiting_when_the_writer_stops_fail_and_later_ones_are_refused(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        committer = GroupCommitter(ledger, max_batch=1)
        outcomes: list[str] = []
        release = anyio.Event()

        async def append(text: str) -> None:
            try:
                await committer.append([notice(text)])
                outcomes.append(f"{text}: recorded")
            except WriterStopped as exc:
                outcomes.append(f"{text}: {exc}")

        async def hold_the_database(*, task_status: TaskStatus[None]) -> None:
            async with ledger.db.transaction():
                task_status.started()
                await release.wait()

        await append("before")
        async with anyio.create_task_group() as outer:
            await outer.start(hold_the_database)
            async with anyio.create_task_group() as writer:
                await writer.start(committer.run)
                outer.start_soon(append, "in flight")
                await wait_all_tasks_blocked()
                outer.start_soon(append, "queued")
                await wait_all_tasks_blocked()
                writer.cancel_scope.cancel()
            release.set()
        await append("after")
        head = await ledger.head()
    stopped = "the audit server stopped before the entry was committed: it was not recorded"
    not_running = "the audit writer is not running (is the server shutting down?)"
    assert outcomes == [
        f"before: {not_running}",
        f"in flight: {stopped}",
        f"queued: {stopped}",
        f"after: {not_running}",
    ]
    assert head.seq == 0


# -- retention -------------------------------------------------------------------------------------


async def test_the_turn_cap_removes_a_goals_oldest_turns_with_their_calls_and_keeps_the_rest(
    db_path: Path,
) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", 0), tool_call("g-1"), answer("g-1", "r1"), turn("g-2", 0)])
        await ledger.append([notice("kept"), turn("g-1", 1), tool_call("g-1"), turn("g-1", 2)])
        outcome = await Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=0).trim()
        kept = [(e.seq, e.kind, e.goal_id) for e in await ledger.tail()]
        report = await ledger.verify()
        head = await ledger.head()
    removed = rows(db_path, "SELECT first_seq, last_seq, prev_hash, last_hash FROM removed_ranges")
    assert kept == [
        (4, "turn", "g-2"),
        (5, "notice", None),
        (6, "turn", "g-1"),
        (7, "tool_call", "g-1"),
        (8, "turn", "g-1"),
        (9, "checkpoint", None),
    ]
    assert outcome.removed == 3
    assert outcome.checkpoint is not None
    assert outcome.checkpoint.subject == "retention removed 3 entries between 1 and 3"
    assert outcome.checkpoint.body == CheckpointBody(
        removed=3,
        first_seq=1,
        last_seq=3,
        last_removed_hash=removed[0][3],
        ranges=1,
        ranges_digest=outcome.checkpoint.body["ranges_digest"],
        turns_per_goal=2,
        max_age_s=None,
    ).model_dump(mode="json")
    assert [RemovedRange(*row) for row in removed] == [RemovedRange(1, 3, GENESIS, removed[0][3])]
    assert report == VerifyReport(ok=True, checked=6, head=head, removed=3, checkpoints=1)


async def test_the_age_limit_can_remove_everything_and_the_checkpoint_still_links_to_it(
    db_path: Path, clock: ManualClock
) -> None:
    async with opened_ledger(db_path, clock) as ledger:
        await ledger.append([notice("old"), turn("g-1", 0)])
        old_head = await ledger.head()
        clock.advance(days=2)
        outcome = await Retention(ledger, turns_per_goal=1000, max_age_s=86400, interval_s=0).trim()
        await ledger.append([notice("new")])
        entries = await ledger.tail()
        report = await ledger.verify()
    assert outcome.checkpoint is not None
    assert (outcome.removed, outcome.checkpoint.prev_hash) == (2, old_head.hash)
    assert [(e.seq, e.kind) for e in entries] == [(3, "checkpoint"), (4, "notice")]
    assert (report.ok, report.removed, report.checkpoints) == (True, 2, 1)


async def test_nothing_to_remove_writes_no_checkpoint(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", 0)])
        outcome = await Retention(ledger, turns_per_goal=5, max_age_s=3600, interval_s=0).trim()
        head = await ledger.head()
    assert (outcome, head.seq) == (TrimOutcome(removed=0, checkpoint=None), 1)


async def test_successive_trims_merge_adjacent_ranges_and_keep_verifying(
    db_path: Path, clock: ManualClock
) -> None:
    async with opened_ledger(db_path, clock) as ledger:
        retention = Retention(ledger, turns_per_goal=1, max_age_s=None, interval_s=0)
        for index in range(4):
            await ledger.append([turn("g-1", index), turn("g-2", index)])
            await retention.trim()
        clock.advance(days=1)
        everything_old = await retention.trim(max_age_s=3600)
        report = await ledger.verify()
    ranges = rows(db_path, "SELECT first_seq, last_seq FROM removed_ranges ORDER BY first_seq")
    assert everything_old.checkpoint is not None
    assert ranges == [(1, everything_old.checkpoint.seq - 1)]
    assert (report.ok, report.checked, report.checkpoints) == (True, 1, 1)
    assert json.loads(rows(db_path, "SELECT body FROM ledger")[0][0])["ranges"] == 1


async def test_retention_runs_at_start_and_after_every_interval(db_path: Path) -> None:
    async with opened_ledger(db_path) as ledger:
        await ledger.append([turn("g-1", 0), turn("g-1", 1), turn("g-1", 2)])
        naps: list[float] = []
        passes = anyio.Event()

        async def sleep(seconds: float) -> None:
            naps.append(seconds)
            if len(naps) == 2:
                passes.set()
                await anyio.sleep_forever()

        retention = Retention(ledger, turns_per_goal=2, max_age_s=None, interval_s=60, sleep=sleep)
        async with anyio.create_task_group() as tg:
            tg.start_soon(retention.run_periodically)
            with anyio.fail_after(10):
                await passes.wait()
            await ledger.append([turn("g-1", 3)])
            tg.cancel_scope.cancel()
        checkpoints = await ledger.tail(kind="checkpoint")
    assert naps == [60, 60]
    assert [c.body["removed"] for c in checkpoints] == [1]


class BrokenRetention(Retention):
    async def trim(self, *, turns_per_goal: int | None = None, max_age_s: float | None = None) -> TrimOutcome:
        raise sqlite3.OperationalError("database is locked")


async def test_a_failed_retention_pass_is_logged_and_retried_next_interval(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with opened_ledger(db_path) as ledger:
        naps = anyio.Event()

        async def sleep(_: float) -> None:
            naps.set()
            await anyio.sleep_forever()

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                BrokenRetention(
                    ledger, turns_per_goal=1, max_age_s=None, interval_s=5, sleep=sleep
                ).run_periodically
            )
            with anyio.fail_after(10):
                await naps.wait()
            tg.cancel_scope.cancel()
    assert [r.getMessage() for r in caplog.records] == ["retention pass failed; retrying in 5s"]
