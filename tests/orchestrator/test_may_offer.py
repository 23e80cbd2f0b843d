"""Which servers a foreground ``nexo agent run`` starts: only those that may offer an allowed tool."""

from __future__ import annotations

import fnmatch

import pytest

from orchestrator.mesh.catalog import may_offer, qualify


@pytest.mark.parametrize(
    ("allowed", "offering"),
    [
        (["*"], {"time", "memory", "audit", "web.search"}),
        (["time__*"], {"time"}),
        (["time__now"], {"time"}),
        (["memory__memory_*", "time__now"], {"memory", "time"}),
        (["mem*"], {"memory"}),
        (["t?me__now"], {"time"}),
        (["*__now"], {"time", "memory", "audit", "web.search"}),
        (["web_search__*"], {"web.search"}),
        (["memory_recall"], set()),
        ([], set()),
    ],
)
def test_a_server_is_started_only_when_an_allowed_pattern_could_match_one_of_its_tools(
    allowed: list[str], offering: set[str]
) -> None:
    servers = {"time", "memory", "audit", "web.search"}
    assert {s for s in servers if may_offer(s, allowed)} == offering


@pytest.mark.parametrize("pattern", ["*", "time__*", "t*", "[tm]ime__now", "time__n?w", "*now"])
def test_no_server_whose_tool_a_pattern_matches_is_left_out(pattern: str) -> None:
    assert fnmatch.fnmatchcase(qualify("time", "now"), pattern)
    assert may_offer("time", [pattern])
