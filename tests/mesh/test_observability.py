"""Metrics, `nexo status` and JSON logs of a running mesh after real traffic."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from tests.fakes.llm import CallTool, FakeLLM, Reply, ScriptItem
from tests.mesh.harness import chat, free_port, nexo, python_server, running, status, write_config

pytestmark = pytest.mark.scenario


def test_metrics_status_and_json_logs_reflect_a_turn_with_a_tool_call(tmp_path: Path) -> None:
    port = free_port()
    script: list[ScriptItem] = [CallTool("time__now", {"timezone_name": "UTC"}), Reply("noon")]
    with FakeLLM(script) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "time": python_server("servers.time"),
                "audit": python_server("servers.audit"),
            },
            extra={"metrics": {"port": port}, "log_format": "json"},
        )
        with running(config) as orch:
            answered = chat(config, "what time is it?")
            scraped = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            snapshot = status(config)
            text = nexo("status", "--config", str(config))
            log = orch.lines[:]
        tail = nexo("audit", "tail", "--json", "-n", "50", "--config", str(config))
    assert answered.stdout == "noon\n"
    assert 'nexo_turns_total{agent="nexo",outcome="tool_calls",source="channel:console"} 1.0' in scraped
    assert 'nexo_turns_total{agent="nexo",outcome="answered",source="channel:console"} 1.0' in scraped
    assert 'nexo_tool_calls_total{agent="nexo",outcome="ok",server="time",tool="now"} 1.0' in scraped
    assert 'nexo_channel_messages_total{direction="in",server="console"} 1.0' in scraped
    assert 'nexo_server_up{server="audit"} 1.0' in scraped
    assert 'nexo_goals_total{agent="nexo",kind="interactive",status="done"} 1.0' in scraped
    assert snapshot["metrics"]["url"] == f"http://127.0.0.1:{port}/metrics"
    tool_rows = snapshot["metrics"]["counters"]["nexo_tool_calls"]
    assert [(r["tool"], r["outcome"], r["value"]) for r in tool_rows] == [("now", "ok", 1.0)]
    assert "since start: 2 turns, 1 tool calls (0 failed, 0 denied)" in text.stdout
    records = [json.loads(line) for line in log if line.startswith("{")]
    assert any(r.get("server") == "audit" or r["message"].startswith("server audit") for r in records)
    ended = [r for r in records if r["message"].startswith("goal g-")]
    assert ended[0]["agent"] == "nexo"
    assert ended[0]["goal"].startswith("g-")
    kinds = [entry["kind"] for entry in json.loads(tail.stdout)]
    assert kinds.count("turn") == 2
    assert kinds.count("tool_call") == 1
    assert kinds.count("channel") == 2
    assert kinds.count("config_change") == 1


def test_metrics_refuse_a_non_loopback_host(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        extra={"metrics": {"port": 9464, "host": "0.0.0.0"}},
    )
    result = nexo("run", "--check-config", "--config", str(config))
    assert result.returncode == 1
    assert "metrics.host" in result.stderr
    assert "loopback only" in result.stderr
