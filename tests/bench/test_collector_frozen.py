"""The benchmarks' timed loops run with what the measuring process made out of the collector's reach."""

from __future__ import annotations

import gc

import pytest

from bench.support import collector_frozen


class Node:
    """A container the collector tracks."""

    def __init__(self) -> None:
        self.peer: Node | None = None


def _tracked(thing: object) -> bool:
    return any(o is thing for o in gc.get_objects())


def test_what_was_made_before_is_frozen_inside_and_given_back_after() -> None:
    before = Node()
    with collector_frozen():
        assert gc.get_freeze_count() > 0
        assert not _tracked(before)  # gc.get_objects() leaves out the frozen generation
        during = Node()
        assert _tracked(during)  # what a timed call makes is collected as usual
    assert gc.get_freeze_count() == 0
    assert _tracked(before)


def test_a_failing_loop_gives_them_back_too() -> None:
    before = Node()
    with pytest.raises(RuntimeError, match="the benchmark failed"), collector_frozen():
        raise RuntimeError("the benchmark failed")
    assert gc.get_freeze_count() == 0
    assert _tracked(before)
