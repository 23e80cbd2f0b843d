"""``python -m bench.turn_ab``: two trees' default meshes up at once, console turns to each in turn."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.turn_ab import main, summary

REPO = Path(__file__).resolve().parents[2]


def test_the_summary_gives_each_trees_quartiles_and_the_difference_of_medians() -> None:
    lines = summary({"a": [10.0, 11.0, 12.0, 13.0, 14.0], "b": [9.0, 9.5, 10.0, 10.5, 11.0]})
    assert lines[0].startswith("a: n=5  p25 10.50 ms  p50 12.00 ms  p75 13.50 ms  mean 12.00 ms")
    assert lines[1].startswith("b: n=5  p25 9.25 ms  p50 10.00 ms")
    assert lines[2] == "p50 difference (first - second): +2.00 ms"


@pytest.mark.scenario
def test_a_tree_against_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(REPO), "--rounds", "2", "--block", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:2]] == [f"this tree ({REPO})", f"other ({REPO})"]
    assert all(" n=4 " in line for line in out[:2])
    assert out[2].startswith("p50 difference (first - second): ")


def test_a_tree_without_its_interpreter_is_named(tmp_path: Path) -> None:
    tree = tmp_path.resolve()
    missing = f"{tree}/.venv/bin/python is missing; run `make dev` in {tree} first"
    with pytest.raises(SystemExit, match=re.escape(missing)):
        main([str(tmp_path), "--rounds", "1"])
