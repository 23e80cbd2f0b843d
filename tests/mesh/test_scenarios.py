"""Whole-mesh scenarios: real orchestrator, real stdio/HTTP servers, the scripted fake model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Reply, ScriptItem
from tests.mesh.harness import (
    REPO,
    Orchestrator,
    base_env,
    chat,
    child_pids,
    free_port,
    nexo_argv,
    running,
    status,
    write_config,
)

pytestmark = pytest.mark.scenario


def _time_result(request: RecordedRequest) -> dict[str, object]:
    (_, content, is_error), *_ = request.tool_results
    assert not is_error, content
    result: dict[str, object] = json.loads(content)
    return result


def test_console_message_runs_a_tool_on_another_server_and_the_reply_arrives_once_in_order(
    tmp_path: Path,
) -> None:
    seen: list[dict[str, object]] = []

    def answer_with_the_time(request: RecordedRequest) -> Reply:
        result = _time_result(request)
        seen.append(result)
        return Reply(f"It is {result['weekday']} in {result['timezone']}.")

    script: list[ScriptItem] = [
        CallTool("time__now", {"timezone_name": "Asia/Tokyo"}),
        answer_with_the_time,
        Reply("Second answer."),
    ]
    with FakeLLM(script) as llm:
        config = write_config(
            tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm.openai_base_url
        )
        with running(config):
            result = chat(config, "what day is it in Tokyo?", "and now?")
        first = llm.requests[0]
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"It is {seen[0]['weekday']} in Asia/Tokyo.", "Second answer."]
    assert seen[0]["timezone"] == "Asia/Tokyo"
    assert first.last_user_text is not None
    assert first.last_user_text.startswith('<channel source="console" chat_id="operator" message_id="')
    assert first.last_user_text.endswith(">what day is it in Tokyo?</channel>")
    assert sorted(first.tool_names) == [
        "channel_list",
        "channel_send",
        "channel_status",
        "notify_channel",
        "notify_origin",
        "send_user_message",
        "time__convert",
        "time__now",
    ]


def test_http_server_with_a_bearer_token_serves_the_mesh(tmp_path: Path) -> None:
    port = free_port()
    token = "s3cret-token-for-tests"
    server = subprocess.Popen(
        nexo_argv("serve", "time", "--http", f"127.0.0.1:{port}"),
        env=base_env({"NEXO_SERVER_TOKEN": token}),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        script: list[ScriptItem] = [
            CallTool("time__now", {"timezone_name": "UTC"}),
            lambda r: Reply(f"UTC offset {_time_result(r)['utc_offset']}"),
        ]
        with FakeLLM(script) as llm:
            servers = {
                "console": {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": ["-m", "channel_servers.console"],
                },
                "time": {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp", "token": token},
            }
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=tmp_path / "state",
                llm_base_url=llm.openai_base_url,
                servers=servers,
            )
            with running(config):
                result = chat(config, "offset?")
                snapshot = status(config)
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "UTC offset +0\n"
    time_server = next(s for s in snapshot["servers"] if s["name"] == "time")
    assert (time_server["transport"], time_server["state"], time_server["tools"]) == ("http", "ready", 2)


def test_a_stdio_server_killed_mid_goal_is_restarted_and_the_goal_continues(tmp_path: Path) -> None:
    killed: list[int] = []
    restarted: list[int] = []
    orchestrator: list[Orchestrator] = []

    def kill_the_time_server(request: RecordedRequest) -> CallTool:
        orch = orchestrator[0]
        (pid,) = child_pids(orch.process.pid, "servers.time")
        since = len(orch.lines)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        # The goal goes on once the supervisor has the server back (its log says so).
        orch.wait_for_line("server time ready", start=since)
        restarted.extend(child_pids(orch.process.pid, "servers.time"))
        return CallTool("time__now", {"timezone_name": "UTC"})

    def after_restart(request: RecordedRequest) -> Reply:
        *_, (_, content, is_error) = request.tool_results
        assert not is_error, content
        return Reply(f"after restart: {json.loads(content)['timezone']}")

    script: list[ScriptItem] = [CallTool("time__now", {}), kill_the_time_server, after_restart]
    with FakeLLM(script) as llm:
        config = write_config(
            tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm.openai_base_url
        )
        with running(config) as orch:
            orchestrator.append(orch)
            result = chat(config, "time twice please")
            snapshot = status(config)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "after restart: UTC\n"
    assert killed
    assert restarted
    assert restarted != killed
    time_server = next(s for s in snapshot["servers"] if s["name"] == "time")
    assert (time_server["state"], time_server["restarts"]) == ("ready", 1)


def test_a_second_run_on_the_same_state_refuses_and_names_the_first(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        config = write_config(
            tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm.openai_base_url
        )
        with running(config) as orch:
            second = subprocess.run(
                nexo_argv("run", "--config", str(config)),
                capture_output=True,
                text=True,
                env=base_env(),
                cwd=REPO,
                timeout=60,
                check=False,
            )
    assert second.returncode == 1
    assert f"pid {orch.process.pid}" in second.stderr
    assert "already running" in second.stderr


def test_unreachable_provider_keeps_the_message_queued_and_answers_once_it_is_back(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(
        tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=f"http://127.0.0.1:{port}/v1"
    )
    with running(config) as orch:
        first = chat(config, "hello?", timeout=5)
        orch.wait_for_line("provider_unavailable", timeout=30)
    assert first.returncode == 1
    assert "could not reach the model" in first.stderr
    assert f"127.0.0.1:{port}" in first.stderr
    assert "queued" in first.stderr
    # The message stayed in the console's log: a new orchestrator answers it without a resend.
    with FakeLLM([Reply("sorry for the wait"), Reply("yes")]) as llm:
        config = write_config(
            tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm.openai_base_url
        )
        with running(config):
            llm.wait_for_requests(1, timeout=30)
            later = chat(config, "still there?", timeout=30)
            requests = llm.requests
    assert requests[0].last_user_text is not None
    assert requests[0].last_user_text.endswith(">hello?</channel>")
    assert later.stdout.splitlines() == ["sorry for the wait", "yes"]
