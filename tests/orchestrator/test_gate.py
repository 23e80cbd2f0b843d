"""The channel gate: five checks in order, the first failure wins and names its fix."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.gate import channel_servers, evaluate

CHANNEL = ("nexo/channel", "nexo/events")


def _config(**channels: Any) -> NexoConfig:
    return NexoConfig.model_validate(
        {
            "servers": {
                "chat": {"transport": "stdio", "command": "x"},
                "other": {"transport": "stdio", "command": "x"},
                "tools": {"transport": "stdio", "command": "x"},
            },
            "llm": {"providers": {"p": {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}}},
            "agents": [{"id": "a", "model": {"provider": "p"}, "channels": ["chat"]}],
            "channels": {"enabled": True, "approved": [{"server": "chat"}], **channels},
        }
    )


def _verdict(
    config: NexoConfig, server: str = "chat", caps: tuple[str, ...] | None = CHANNEL, name: str = "chat"
) -> tuple[str, str]:
    result = evaluate(config, config.agents[0], server, caps, name)
    return result.verdict, result.kind


def test_an_approved_bound_channel_registers() -> None:
    assert _verdict(_config()) == ("register", "")
    assert _verdict(_config(), caps=("claude/channel",)) == ("register", "")


@pytest.mark.parametrize(
    ("overrides", "server", "caps", "expected"),
    [
        ({}, "chat", None, ("skip", "capability")),
        ({}, "chat", ("nexo/events",), ("skip", "capability")),
        ({"enabled": False}, "chat", CHANNEL, ("skip", "disabled")),
        ({}, "other", CHANNEL, ("not_bound", "binding")),
        (
            {"approved": [{"server": "chat", "plugin_source": "telegram"}]},
            "chat",
            CHANNEL,
            ("skip", "plugin_source"),
        ),
        ({"approved": []}, "chat", CHANNEL, ("skip", "not_approved")),
    ],
)
def test_each_check_fails_in_order(
    overrides: dict[str, Any], server: str, caps: tuple[str, ...] | None, expected: tuple[str, str]
) -> None:
    assert _verdict(_config(**overrides), server, caps) == expected


def test_the_kill_switch_wins_over_a_missing_approval() -> None:
    assert _verdict(_config(enabled=False, approved=[])) == ("skip", "disabled")


def test_a_pinned_plugin_source_that_matches_registers() -> None:
    config = _config(approved=[{"server": "chat", "plugin_source": "chat"}])
    assert _verdict(config, name="chat") == ("register", "")


def test_lines_name_the_problem_and_the_fix() -> None:
    config = _config(approved=[])
    line = evaluate(config, config.agents[0], "chat", CHANNEL, "chat").line()
    assert line == (
        "chat         SKIP not_approved for a: it is not in channels.approved. "
        "Fix: add `- server: chat` under channels.approved once you trust it"
    )
    assert (
        evaluate(config, config.agents[0], "chat", None, None)
        .line()
        .startswith("chat         SKIP capability")
    )


def test_channel_servers_are_the_bound_ones_and_those_declaring_the_capability() -> None:
    config = _config()
    assert channel_servers(config, {"other": ("claude/channel",), "tools": ()}) == ["chat", "other"]


def test_a_server_that_failed_to_start_fails_its_row_with_its_own_reason() -> None:
    config = _config()
    result = evaluate(config, config.agents[0], "chat", None, None, "token refused: set CHAT_TOKEN.")
    assert (result.verdict, result.kind) == ("fail", "start")
    assert result.line() == (
        "chat         FAIL start for a: the server failed to start or connect: token refused: set "
        "CHAT_TOKEN. Fix: correct servers.chat (its env or command) as the message says, then run "
        "`nexo channel doctor` again"
    )
    assert _verdict(config, caps=None) == ("skip", "capability")
