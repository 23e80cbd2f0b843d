"""`nexo run --check-config` names a missing Anthropic key before any model call."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import start_blocking_portal
from mcp.server import MCPServer

from orchestrator.cli.main import main
from shared.hosting.listener import listen
from shared.hosting.options import HttpOptions
from shared.hosting.serve import serve_http

NO_KEY = (
    "llm.providers.claude.api_key: agent 'nexo' uses provider 'claude' (Anthropic at "
    "https://api.anthropic.com) but its api_key is empty. Fix: export ANTHROPIC_API_KEY=... (the built-in "
    "defaults and config/agents.yaml read it), set llm.providers.claude.api_key, or choose another "
    "provider with NEXO_MODEL_PROVIDER\n"
)

LOCAL = {"kind": "openai_compat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}


def _config(
    tmp_path: Path,
    providers: dict[str, dict[str, str]],
    *,
    servers: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    **more: Any,
) -> Path:
    """An agents.yaml with one agent on the first of ``providers``; ``agent`` adds to that agent."""
    path = tmp_path / "agents.yaml"
    config = {
        "state_dir": str(tmp_path / "state"),
        "servers": servers or {},
        "llm": {"providers": providers},
        "agents": [{"id": "nexo", "model": {"provider": next(iter(providers))}, **(agent or {})}],
        **more,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_agent_on_anthropic_without_a_key_is_named_at_check_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, {"claude": {"kind": "anthropic", "model": "claude-sonnet-4-5"}})
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
    provider = {"kind": "anthropic", "model": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9"}
    path = _config(tmp_path, {"claude": provider})
    assert main(["run", "--check-config", "--config", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (0 servers reachable)\n"


@pytest.mark.scenario
def test_a_poller_the_cron_server_refuses_is_named_at_check_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pollers = [
        {"name": "inbox", "schedule": "every 15m", "prompt": "check the inbox"},
        {"name": "ticker", "schedule": "every 10s", "prompt": "check the price"},
    ]
    cron = {"transport": "stdio", "command": sys.executable, "args": ["-m", "servers.cron"]}
    path = _config(tmp_path, {"local": LOCAL}, servers={"cron": cron}, agent={"pollers": pollers})
    assert main(["run", "--check-config", "--config", str(path)]) == 1
    assert capfd.readouterr().err == (
        f"{path}: agents[0].pollers[1].schedule: poller 'ticker' of agent nexo is refused: 'every 10s' "
        "fires more often than once every 60 s; use 'every 1m' or longer. Fix: change the schedule, then "
        "check it with `nexo run --check-config`\n"
    )


def test_a_refused_token_is_reported_as_refused_with_where_it_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    path = _config(
        tmp_path,
        {"local": {"kind": "openai_compat", "model": "m", "base_url": url}},
        servers={"notes": {"transport": "http", "url": url, "token": "${NOTES_TOKEN}"}},
    )
    server: MCPServer[Any] = MCPServer("notes")
    with (
        pytest.MonkeyPatch.context() as env,
        start_blocking_portal() as portal,
    ):
        env.setenv("NOTES_TOKEN", "an-old-token")
        serving = portal.start_task_soon(
            partial(serve_http, server, HttpOptions(token="the-token"), sock=sock)
        )
        code = main(["run", "--check-config", "--config", str(path)])
        serving.cancel()
    assert code == 1
    assert capsys.readouterr().err == (
        f"{path}: servers.notes: {url}: the server refused the bearer token (HTTP 401, invalid_token); nexo "
        f"read it from the environment variable NOTES_TOKEN (servers.notes.token in {path}). Fix: put the "
        "server's token there and restart nexo (a nexo server names its token when it starts; see "
        "`nexo serve --help`)\n"
    )


def test_autonomy_intervals_shorter_than_the_cycle_gap_are_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, {"local": LOCAL}, agent={"heartbeat": {"enabled": True, "interval_s": 60}})
    assert main(["run", "--check-config", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"{path}: ok (0 servers reachable)\n"
    assert captured.err == (
        f"{path}: warning: agents.nexo.heartbeat.interval_s (60 s) is shorter than "
        "autonomy.limits.min_cycle_gap_s (300 s): heartbeats would run every 300 s. Fix: raise interval_s "
        "to at least 300 or lower min_cycle_gap_s to 60 or less\n"
    )


def _priced_config(tmp_path: Path, prices: dict[str, dict[str, float]]) -> Path:
    provider = {"kind": "anthropic", "model": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9"}
    return _config(
        tmp_path, {"claude": provider}, autonomy={"budgets": {"per_day": {"usd": 2.0}}, "prices": prices}
    )


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
