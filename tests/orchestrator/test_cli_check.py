"""`nexo run --check-config` names a missing Anthropic key before any model call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.cli.main import main

NO_KEY = (
    "llm.providers.claude.api_key: agent 'nexo' uses provider 'claude' (Anthropic at "
    "https://api.anthropic.com) but its api_key is empty. Fix: export ANTHROPIC_API_KEY=... (the built-in "
    "defaults and config/agents.yaml read it), set llm.providers.claude.api_key, or choose another "
    "provider with NEXO_MODEL_PROVIDER\n"
)


def test_an_agent_on_anthropic_without_a_key_is_named_at_check_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "servers": {},
                "llm": {"providers": {"claude": {"kind": "anthropic", "model": "claude-sonnet-4-5"}}},
                "agents": [{"id": "nexo", "model": {"provider": "claude"}}],
            }
        )
    )
    assert main(["run", "--check-config", "--config", str(path)]) == 1
    assert capsys.readouterr().err == f"{path}: {NO_KEY}"


def test_the_built_in_defaults_with_claude_chosen_need_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NEXO_CONFIG", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("NEXO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NEXO_MODEL_PROVIDER", "claude")
    assert main(["run", "--check-config"]) == 1
    assert capsys.readouterr().err == f"<built-in defaults>: {NO_KEY}"
    assert not (tmp_path / "state").exists()


def test_a_proxy_in_front_of_anthropic_may_hold_the_key_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agents.yaml"
    provider = {"kind": "anthropic", "model": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9"}
    path.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "servers": {},
                "llm": {"providers": {"claude": provider}},
                "agents": [{"id": "nexo", "model": {"provider": "claude"}}],
            }
        )
    )
    assert main(["run", "--check-config", "--config", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (0 servers reachable)\n"


def test_autonomy_intervals_shorter_than_the_cycle_gap_are_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agents.yaml"
    provider = {"kind": "openai_compat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    path.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "servers": {},
                "llm": {"providers": {"local": provider}},
                "agents": [
                    {
                        "id": "nexo",
                        "model": {"provider": "local"},
                        "heartbeat": {"enabled": True, "interval_s": 60},
                    }
                ],
            }
        )
    )
    assert main(["run", "--check-config", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"{path}: ok (0 servers reachable)\n"
    assert captured.err == (
        f"{path}: warning: agents.nexo.heartbeat.interval_s (60 s) is shorter than "
        "autonomy.limits.min_cycle_gap_s (300 s): heartbeats would run every 300 s. Fix: raise interval_s "
        "to at least 300 or lower min_cycle_gap_s to 60 or less\n"
    )
