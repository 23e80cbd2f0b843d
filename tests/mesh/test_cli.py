"""The operator commands as users run them: real processes, the scripted fake model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Reply, ScriptItem
from tests.mesh.harness import REPO, base_env, nexo, nexo_argv, python_server, running, write_config

pytestmark = pytest.mark.scenario


def _config(tmp_path: Path, llm_url: str, notes: Path | None = None) -> Path:
    servers = {"console": python_server("channel_servers.console"), "time": python_server("servers.time")}
    if notes is not None:
        servers["notes"] = python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)})
    return write_config(
        tmp_path / "agents.yaml", state_dir=tmp_path / "state", llm_base_url=llm_url, servers=servers
    )


def test_agent_run_shows_progress_prints_the_answer_and_exits_0(tmp_path: Path) -> None:
    script: list[ScriptItem] = [CallTool("time__now", {"timezone_name": "UTC"}), Reply("It is late.")]
    with FakeLLM(script) as llm:
        result = nexo(
            "agent", "run", "what time is it?", "--config", str(_config(tmp_path, llm.openai_base_url))
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is late.\n"
    assert "starting 1 servers: time" in result.stderr
    assert "time__now" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("[done")


def test_agent_run_json_reports_the_outcome_and_a_budget_stop_exits_1(tmp_path: Path) -> None:
    script: list[ScriptItem] = [CallTool("time__now", {}) for _ in range(5)]
    with FakeLLM(script) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "time": python_server("servers.time"),
            },
            agent={"budgets": {"max_turns": 2}},
        )
        result = nexo("agent", "run", "loop forever", "--config", str(config), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert (report["outcome"], report["axis"], report["turns"], report["tool_calls"]) == (
        "budget_exhausted",
        "turns",
        2,
        2,
    )


def test_agent_run_denies_a_side_effect_when_nobody_can_answer_and_yes_allows_it(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"

    def echo_error(request: RecordedRequest) -> Reply:
        (_, content, is_error), *_ = request.tool_results
        return Reply(f"{is_error}: {content}")

    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "a"}), echo_error]
    with FakeLLM(list(script)) as llm:
        config = _config(tmp_path, llm.openai_base_url, notes)
        denied = nexo("agent", "run", "write a", "--config", str(config))
    with FakeLLM(list(script)) as llm:
        config = _config(tmp_path, llm.openai_base_url, notes)
        allowed = nexo("agent", "run", "write a", "--config", str(config), "--yes")
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout.startswith("True: ")
    assert "stdin is not a terminal (use --yes)" in denied.stdout
    assert allowed.stdout.startswith("False: ")
    assert notes.read_text() == "a\n"


def test_serve_runs_one_server_that_any_mcp_client_can_use() -> None:
    async def call() -> object:
        params = StdioServerParameters(
            command=nexo_argv()[0], args=[*nexo_argv()[1:], "serve", "time"], env=base_env(), cwd=str(REPO)
        )
        async with Client(stdio_client(params)) as client:
            result = await client.call_tool("now", {"timezone_name": "UTC"})
            return result.structured_content

    content = anyio.run(call)
    assert isinstance(content, dict)
    assert content["timezone"] == "UTC"


def test_serve_names_the_built_in_servers_for_an_unknown_one() -> None:
    result = nexo("serve", "nosuch")
    assert result.returncode == 1
    assert result.stderr.startswith("nexo: no built-in server 'nosuch'; choose one of: ")


def test_status_says_when_nothing_is_running_as_text_and_json(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    text = nexo("status", "--config", str(config))
    as_json = nexo("status", "--config", str(config), "--json")
    assert text.returncode == 1
    assert "nexo is not running on" in text.stderr
    assert "`nexo run`" in text.stderr
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["running"] is False


def test_status_of_a_running_mesh_and_a_closed_pipe_gives_no_traceback(tmp_path: Path) -> None:
    with FakeLLM([]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config):
            text = nexo("status", "--config", str(config))
            piped = subprocess.run(  # noqa: S602 -- the pipe is the point of this test
                # `true` exits without reading, so the write hits a closed pipe.
                f"{' '.join(nexo_argv('status', '--config', str(config), '--json'))} | true; "
                'echo "exit=${PIPESTATUS[0]}"',
                shell=True,
                executable="/bin/bash",
                capture_output=True,
                text=True,
                env=base_env(),
                cwd=REPO,
                timeout=60,
                check=False,
            )
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].split() == ["SERVER", "TRANSPORT", "STATE", "TOOLS", "LAST", "ERROR"]
    assert [line.split()[:4] for line in lines[2:4]] == [
        ["console", "stdio", "ready", "1"],
        ["time", "stdio", "ready", "2"],
    ]
    assert piped.stdout == "exit=1\n"
    assert "Traceback" not in piped.stderr
