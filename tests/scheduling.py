"""Longest test files first, so that the xdist workers of ``make test`` finish together.

With ``--dist loadfile --no-loadscope-reorder`` xdist hands whole files to its workers in collection
order. A long scenario file that starts last keeps one worker busy while the other has nothing left,
and xdist's own reordering (files with more tests first) puts exactly those files last: they hold a
few long tests each. The expected cost of a file is read from its tests' marks: scenarios (real
processes) before in-process tests, then the largest ``timeout`` a test declares (the long scenarios
size theirs to what they take on two cores), then the number of scenario tests. Ties keep the
collection order, and the tests of a file keep theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class _FileCost:
    first: int
    """Position of the file's first test in the collection: the tie-breaker."""
    scenarios: int = 0
    longest_timeout: float = 0.0

    def key(self) -> tuple[bool, float, int, int]:
        return (self.scenarios == 0, -self.longest_timeout, -self.scenarios, self.first)


def _declared_timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return 0.0
    seconds = marker.args[0] if marker.args else marker.kwargs.get("timeout", 0.0)
    return float(seconds)


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    costs: dict[str, _FileCost] = {}
    for position, item in enumerate(items):
        cost = costs.setdefault(item.nodeid.split("::", 1)[0], _FileCost(first=position))
        if item.get_closest_marker("scenario") is not None:
            cost.scenarios += 1
        cost.longest_timeout = max(cost.longest_timeout, _declared_timeout(item))
    return sorted(items, key=lambda item: costs[item.nodeid.split("::", 1)[0]].key())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first(items)
