"""The hash chain as pure functions: encoding, hashing, removed ranges and the verification walk."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from servers.audit.chain import (
    GENESIS,
    RemovedRange,
    Row,
    canonical_entry,
    entry_hash,
    merge,
    ranges_digest,
    row_hash,
    runs,
    verify_rows,
)
from shared.protocol.audit.entries import Head, Problem, VerifyReport


def chain(count: int, first_prev: str = GENESIS) -> list[Row]:
    """``count`` correctly linked notice rows, seq 1..count."""
    result: list[Row] = []
    prev = first_prev
    for seq in range(1, count + 1):
        at = f"2026-11-21T12:00:{seq:02d}.000000+00:00"
        body = {"level": "info", "message": f"m{seq}"}
        hash_ = entry_hash(prev, canonical_entry(seq, at, "notice", "cli", "", None, f"s{seq}", body))
        result.append(Row(seq, at, "notice", "cli", "", None, f"s{seq}", json.dumps(body), prev, hash_))
        prev = hash_
    return result


def head_of(rows: list[Row]) -> Head:
    return Head(seq=rows[-1].seq, hash=rows[-1].hash)


def removed(rows: list[Row], first: int, last: int) -> RemovedRange:
    return RemovedRange(first, last, rows[first - 1].prev_hash, rows[last - 1].hash)


def checkpoint_for(ranges: list[RemovedRange], seq: int = 99) -> tuple[int, str]:
    return seq, json.dumps({"ranges_digest": ranges_digest(ranges)})


def report(rows: list[Row], ranges: list[RemovedRange], **kwargs: object) -> VerifyReport:
    kept = [row for row in rows if not any(r.first <= row.seq <= r.last for r in ranges)]
    latest = kwargs.pop("latest_checkpoint", checkpoint_for(ranges) if ranges else None)
    head = head_of(kept) if kept else Head(seq=0, hash=GENESIS)
    return verify_rows(kept, ranges, head=head, latest_checkpoint=latest, **kwargs)  # type: ignore[arg-type]


def where(result: VerifyReport) -> tuple[int, str] | None:
    """The first problem's (seq, kind), or None for an intact ledger."""
    return None if result.problem is None else (result.problem.seq, result.problem.kind)


def test_the_canonical_encoding_is_a_fixed_field_order_array_with_sorted_compact_body() -> None:
    encoded = canonical_entry(
        7, "2026-11-21T12:00:00.000000+00:00", "turn", "cli", "nexo", "g-1", "s", {"b": 1, "a": "é"}
    )
    assert (
        encoded
        == '[7,"2026-11-21T12:00:00.000000+00:00","turn","cli","nexo","g-1","s",{"a":"é","b":1}]'.encode()
    )


def test_an_entry_hash_is_sha256_of_the_raw_previous_hash_then_the_canonical_entry() -> None:
    assert hashlib.sha256(b"nexo audit ledger v1").hexdigest() == GENESIS
    assert entry_hash(GENESIS, b"[1]") == hashlib.sha256(bytes.fromhex(GENESIS) + b"[1]").hexdigest()


def test_row_hash_recomputes_a_stored_row_and_gives_none_for_a_body_that_is_not_json() -> None:
    row = chain(1)[0]
    assert row_hash(row) == row.hash
    assert row_hash(replace(row, body="{not json")) is None


def test_runs_group_consecutive_linked_rows_and_split_at_gaps_and_broken_links() -> None:
    removed_rows = [(3, "h2", "h3"), (4, "h3", "h4"), (6, "h5", "h6"), (7, "XX", "h7")]
    assert runs(removed_rows) == [
        RemovedRange(3, 4, "h2", "h4"),
        RemovedRange(6, 6, "h5", "h6"),
        RemovedRange(7, 7, "XX", "h7"),
    ]


def test_merge_joins_adjacent_ranges_only_when_their_links_agree() -> None:
    merged = merge(
        [RemovedRange(5, 6, "h4", "h6"), RemovedRange(1, 4, "g", "h4"), RemovedRange(7, 8, "zz", "h8")]
    )
    assert merged == [RemovedRange(1, 6, "g", "h6"), RemovedRange(7, 8, "zz", "h8")]


def test_the_ranges_digest_does_not_depend_on_the_order_ranges_are_listed_in() -> None:
    a, b = RemovedRange(1, 2, "g", "h2"), RemovedRange(5, 5, "h4", "h5")
    assert ranges_digest([a, b]) == ranges_digest([b, a]) != ranges_digest([a])


def test_an_intact_chain_verifies_and_reports_its_head() -> None:
    rows = chain(5)
    assert report(rows, []) == VerifyReport(
        ok=True, checked=5, head=head_of(rows), removed=0, checkpoints=0, problem=None
    )


def test_an_empty_ledger_verifies_with_the_genesis_head_and_accepts_it_as_expected() -> None:
    empty = Head(seq=0, hash=GENESIS)
    assert report([], [], expected_head=empty) == VerifyReport(
        ok=True, checked=0, head=empty, removed=0, checkpoints=0, problem=None
    )


def test_a_gap_bridged_by_a_recorded_range_verifies() -> None:
    rows = chain(8)
    ranges = [removed(rows, 2, 3), removed(rows, 5, 6)]
    result = report(rows, ranges)
    assert (result.ok, result.checked, result.removed) == (True, 4, 4)


def test_a_gap_no_range_records_is_a_seq_gap_at_the_first_missing_entry() -> None:
    rows = chain(6)
    kept = [row for row in rows if row.seq not in (3, 4)]
    result = verify_rows(kept, [], head=head_of(rows), latest_checkpoint=None)
    assert result.problem == Problem(
        seq=3,
        kind="seq_gap",
        detail="entry 3 is missing (the next entry present is 5) and no retention checkpoint records "
        "its removal: it was deleted outside retention",
    )


def test_a_row_present_inside_a_removed_range_is_named() -> None:
    rows = chain(6)
    ranges = [removed(rows, 2, 5)]
    kept = [row for row in rows if row.seq not in (2, 3, 5)]
    result = verify_rows(kept, ranges, head=head_of(rows), latest_checkpoint=checkpoint_for(ranges))
    assert where(result) == (4, "checkpoint_mismatch")
    assert "inside the range 2..5" in str(result.problem)


def test_a_range_that_does_not_follow_the_entry_before_it_is_a_checkpoint_mismatch() -> None:
    rows = chain(5)
    ranges = [RemovedRange(3, 3, "0" * 64, rows[2].hash)]
    result = report(rows, ranges)
    assert where(result) == (3, "checkpoint_mismatch")


def test_ranges_without_any_checkpoint_or_with_a_stale_digest_are_checkpoint_mismatches() -> None:
    rows = chain(5)
    ranges = [removed(rows, 2, 3)]
    orphan = report(rows, ranges, latest_checkpoint=None)
    stale = report(rows, ranges, latest_checkpoint=(9, json.dumps({"ranges_digest": ranges_digest([])})))
    garbled = report(rows, ranges, latest_checkpoint=(9, "not json"))
    assert where(orphan) == (2, "checkpoint_mismatch")
    assert where(stale) == (9, "checkpoint_mismatch")
    assert garbled.problem == stale.problem


def test_a_range_beyond_the_last_entry_is_named() -> None:
    rows = chain(4)
    ranges = [removed(rows, 4, 4)]
    result = verify_rows(rows[:3], ranges, head=head_of(rows[:3]), latest_checkpoint=checkpoint_for(ranges))
    assert where(result) == (4, "checkpoint_mismatch")


@pytest.mark.parametrize(
    ("expected", "kind", "fragment"),
    [
        (Head(seq=6, hash="a" * 64), "head_mismatch", "entries were removed from the end"),
        (Head(seq=4, hash="b" * 64), "head_mismatch", "the ledger was rewritten up to there"),
        (Head(seq=0, hash="c" * 64), "head_mismatch", "a head at entry 0 must be"),
    ],
)
def test_an_expected_head_that_the_ledger_no_longer_has_is_a_head_mismatch(
    expected: Head, kind: str, fragment: str
) -> None:
    result = report(chain(5), [], expected_head=expected)
    assert where(result) == (expected.seq, kind)
    assert fragment in str(result.problem)


def test_an_expected_head_inside_a_removed_range_can_only_be_checked_at_the_range_end() -> None:
    rows = chain(6)
    ranges = [removed(rows, 2, 4)]
    at_end = report(rows, ranges, expected_head=Head(seq=4, hash=rows[3].hash))
    inside = report(rows, ranges, expected_head=Head(seq=3, hash=rows[2].hash))
    assert at_end.ok
    assert inside.problem is not None
    assert "cannot be compared; record a newer head" in str(inside.problem)


def test_the_first_problem_by_seq_wins_over_a_later_one() -> None:
    rows = chain(6)
    ranges = [removed(rows, 5, 5)]
    kept = [row for row in rows if row.seq not in (2, 5)]
    result = verify_rows(kept, ranges, head=head_of(rows), latest_checkpoint=(9, "{}"))
    assert where(result) == (2, "seq_gap")
