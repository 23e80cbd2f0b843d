"""A benchmark row's verdict: against a fixed target, or against its own baseline of the same run."""

from __future__ import annotations

from bench.stats import Result, table


def test_a_relative_target_is_judged_against_the_baseline_measured_in_the_same_run() -> None:
    row = Result("tool call, http", "ms", "stdio", relative_target=(2.0, 0.0))
    row.samples, row.baseline = [4.0, 5.0, 6.0], [2.0, 3.0, 4.0]
    assert (row.limit, row.verdict) == (6.0, "meets")
    row.samples = [7.0, 8.0, 9.0]
    assert row.verdict == "misses"
    assert row.as_dict()["target"] == {"statistic": "median", "max": 6.0}
    assert "p50 <= 2x baseline" in table([row])


def test_an_offset_is_added_to_the_scaled_baseline() -> None:
    row = Result("echo hi | nexo chat", "ms", "python -c pass", relative_target=(1.5, 100.0))
    row.samples, row.baseline = [180.0], [60.0]
    assert (row.limit, row.verdict, row.target_text) == (190.0, "meets", "p50 <= 1.5x baseline + 100 ms")


def test_a_relative_target_without_a_baseline_gives_no_verdict_but_a_fixed_one_does() -> None:
    relative = Result("r", "ms", "b", samples=[1.0], relative_target=(2.0, 0.0))
    fixed = Result("f", "s", "b", samples=[0.4], target=0.5)
    assert (relative.limit, relative.verdict) == (None, "-")
    assert (fixed.limit, fixed.verdict, fixed.target_text) == (0.5, "meets", "p50 <= 0.5 s")
