"""What the doctors say about a Claude Code channel plugin: who can approve through it, and its own
access file next to nexo's pairing (the official plugins' access.json shape)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.claude_plugins import approvals_line, plugin_findings
from orchestrator.config.loading import load
from orchestrator.config.nexo import NexoConfig

CLAUDE = ("claude/channel", "claude/channel/permission")
NEXO = ("nexo/channel", "nexo/channel/permission", "claude/channel", "claude/channel/permission")


def _config(tmp_path: Path, *, relay: bool, env: dict[str, str] | None = None, **server: Any) -> NexoConfig:
    document = {
        "servers": {"tg": {"transport": "stdio", "command": "bun", "env": env or {}, **server}},
        "llm": {"providers": {"p": {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}}},
        "agents": [{"id": "nexo", "model": {"provider": "p"}, "channels": ["tg"]}],
        "channels": {"enabled": True, "approved": [{"server": "tg"}]},
        "channel_options": {"tg": {"claude_permission_relay": relay, "pairing": {"allow_from": ["100"]}}},
    }
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(document))
    return load(path, env={})


def _access(directory: Path, **fields: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    access = {"dmPolicy": "allowlist", "allowFrom": ["100"], "groups": {}, "pending": {}, **fields}
    (directory / "access.json").write_text(json.dumps(access))
    return directory / "access.json"


def _rows(config: NexoConfig, capabilities: tuple[str, ...], home: Path) -> list[tuple[str, str]]:
    return [(f.level, f.check) for f in plugin_findings(config, "tg", capabilities, home)]


def test_list_says_which_contract_relays_and_who_answers(tmp_path: Path) -> None:
    off, on = _config(tmp_path, relay=False), _config(tmp_path, relay=True)
    assert approvals_line(off, "tg", NEXO) == "approvals in nexo's contract, answered by its owners"
    assert approvals_line(off, "tg", CLAUDE).startswith(
        "approvals not relayed (Claude Code's contract names no"
    )
    assert approvals_line(on, "tg", CLAUDE) == (
        "approvals in Claude Code's contract: whoever the server lets answer counts as the operator"
    )
    assert approvals_line(on, "tg", ("claude/channel",)) == "no approvals"


def test_a_plugin_with_its_own_pairing_is_a_double_gate(tmp_path: Path) -> None:
    path = _access(tmp_path / "plugin", dmPolicy="pairing")
    config = _config(tmp_path, relay=False, env={"TELEGRAM_STATE_DIR": str(tmp_path / "plugin")})
    findings = plugin_findings(config, "tg", CLAUDE, tmp_path)
    assert [(f.level, f.check) for f in findings] == [
        ("info", "claude.relay"),
        ("warning", "claude.double_gate"),
    ]
    assert str(path) in findings[1].detail
    assert f'set "dmPolicy": "allowlist" in {path}' in findings[1].fix


def test_the_relay_is_an_error_while_the_plugin_prompts_someone_who_is_not_an_owner(tmp_path: Path) -> None:
    _access(tmp_path / ".claude" / "channels" / "telegram", allowFrom=["100", "555"], groups={"-100": {}})
    config = _config(tmp_path, relay=True, args=["run", "--cwd", "plugins/telegram", "start"])
    findings = plugin_findings(config, "tg", CLAUDE, tmp_path)
    assert [(f.level, f.check) for f in findings] == [
        ("info", "claude.relay"),
        ("error", "claude.relay"),
        ("warning", "claude.relay"),
    ]
    assert "555 are not owners here" in findings[1].detail


def test_an_owner_the_plugin_drops_and_an_unseen_access_file_are_named(tmp_path: Path) -> None:
    _access(tmp_path / "plugin", allowFrom=["200"])
    seen = _config(tmp_path, relay=False, env={"TELEGRAM_STATE_DIR": str(tmp_path / "plugin")})
    assert ("warning", "claude.access") in _rows(seen, CLAUDE, tmp_path)
    unseen = _config(tmp_path, relay=False, args=["serve"])
    (finding,) = [f for f in plugin_findings(unseen, "tg", CLAUDE, tmp_path) if f.check == "claude.access"]
    assert finding.level == "info"
    assert "nexo cannot see this plugin's own access control" in finding.detail


def test_a_relay_setting_on_a_server_that_cannot_use_it_is_a_warning(tmp_path: Path) -> None:
    config = _config(tmp_path, relay=True)
    assert _rows(config, NEXO, tmp_path) == [("warning", "claude.relay")]
    assert _rows(config, ("claude/channel",), tmp_path)[0] == ("warning", "claude.relay")


@pytest.mark.parametrize("capabilities", [None, ("nexo/channel",)])
def test_nothing_is_said_about_servers_that_are_not_claude_plugins(
    tmp_path: Path, capabilities: tuple[str, ...] | None
) -> None:
    assert plugin_findings(_config(tmp_path, relay=False), "tg", capabilities, tmp_path) == []
