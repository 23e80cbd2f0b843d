"""Which servers a foreground ``nexo agent run`` starts: only those that may offer an allowed tool."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from orchestrator.cli.agent import foreground_servers
from orchestrator.cli.common import load_config
from orchestrator.mesh.catalog import may_offer, qualify
from tests.mesh.harness import python_server, write_config


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


@pytest.mark.parametrize(
    ("allowed", "started"),
    [
        (["*"], ["audit", "time"]),
        (["pairing__*", "time__now"], ["pairing", "time"]),
    ],
)
def test_a_foreground_goal_starts_no_channel_server_and_no_pairing_server_it_does_not_name(
    tmp_path: Path, allowed: list[str], started: list[str]
) -> None:
    agents = [
        {"id": "nexo", "model": {"provider": "fake"}, "channels": ["console"], "allowed_tools": allowed},
        {"id": "helper", "model": {"provider": "fake"}, "channels": ["web"]},
    ]
    path = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={
            "console": python_server("channel_servers.console"),
            "web": python_server("channel_servers.webhook"),
            "spare": python_server("channel_servers.console"),
            "pairing": python_server("servers.pairing"),
            "time": python_server("servers.time"),
            "audit": python_server("servers.audit"),
        },
        extra={
            "agents": agents,
            "channels": {"enabled": True, "approved": [{"server": s} for s in ("console", "web", "spare")]},
        },
    )
    config = load_config(str(path))
    assert sorted(foreground_servers(config, config.agent("nexo"))) == started
