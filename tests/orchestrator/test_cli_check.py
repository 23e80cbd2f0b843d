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


def _priced_config(tmp_path: Path, prices: dict[str, dict[str, float]]) -> Path:
    path = tmp_path / "agents.yaml"
    provider = {"kind": "anthropic", "model": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9"}
    path.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "servers": {},
                "llm": {"providers": {"claude": provider}},
                "agents": [{"id": "nexo", "model": {"provider": "claude"}}],
                "autonomy": {"budgets": {"per_day": {"usd": 2.0}}, "prices": prices},
            }
        )
    )
    return path


@pytest.mark.parametrize("command", [["run", "--check-config"], ["setup", "doctor"]])
def test_a_money_budget_without_the_price_of_an_agents_model_is_named_at_check_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = _priced_config(tmp_path, {"claude-opus-4": {"input_per_mtok": 15, "output_per_mtok": 75}})
    with pytest.raises(SystemExit) as exited:
        main([*command, "--config", str(path)])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        f"{path}: autonomy.prices.claude-sonnet-4-5: autonomy.budgets.per_day.usd is set but agents[0] "
        "(nexo) uses model 'claude-sonnet-4-5' of provider 'claude', which has no price, so its unattended "
        "work could not run. Fix: add autonomy.prices['claude-sonnet-4-5'] (or 'claude/claude-sonnet-4-5') "
        "with input_per_mtok and output_per_mtok (USD per million tokens), or remove the usd budget\n"
    )


@pytest.mark.parametrize("key", ["claude-sonnet-4-5", "claude/claude-sonnet-4-5"])
def test_the_documented_price_keys_match_an_agents_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    path = _priced_config(tmp_path, {key: {"input_per_mtok": 3, "output_per_mtok": 15}})
    assert main(["run", "--check-config", "--config", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (0 servers reachable)\n"
