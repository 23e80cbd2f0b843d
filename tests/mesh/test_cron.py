"""Cron in a running mesh: the model schedules, a fire runs a turn once, its answer reaches the chat,
config pollers become entries, and the kill switch stops fires."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import Orchestrator, nexo, python_server, running, write_config
from tests.mesh.inbox import inbox_server, reply_texts, say

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _config(tmp_path: Path, llm_url: str) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path),
            "audit": python_server("servers.audit"),
            "cron": python_server("servers.cron"),
        },
        agent={
            "channels": ["inbox"],
            # Scheduling is a write the operator allows here without asking.
            "permissions": {"tools": {"cron__cron_create": "safe"}},
            "pollers": [
                {
                    "name": "morning",
                    "schedule": "0 7 * * *",
                    "prompt": "summarise the inbox",
                    "channel": "inbox",
                }
            ],
        },
        extra={"operator": {"channel": "inbox", "chat_id": "op"}},
    )


def _json(*args: str) -> Any:
    result = nexo(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _model(request: RecordedRequest) -> ModelReply | Step:
    text = request.last_user_text or ""
    if request.body["messages"][-1]["role"] == "tool":
        return ModelReply("scheduled for 07:00 every day")
    if "check the backups" in text and "[scheduled" not in text:
        return Step(
            tool_calls=(
                CallTool(
                    "cron__cron_create",
                    {
                        "schedule": "30 6 * * *",
                        "prompt": "check the backups",
                        "channel": "inbox",
                        "recipient": "op",
                    },
                ),
            )
        )
    if "[scheduled" in text:
        return ModelReply("backups: all 3 fine")
    return ModelReply("ok")


def _wait(orch: Orchestrator, text: str, start: int = 0) -> int:
    return orch.wait_for_line(text, timeout=60, start=start)


async def test_a_scheduled_prompt_fires_once_and_its_answer_reaches_the_chat(tmp_path: Path) -> None:
    with FakeLLM(default=_model) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        cfg = ("--config", str(config))
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server cron ready")
            await say(tmp_path, "m1", "every morning at 6:30 check the backups")
            await anyio.to_thread.run_sync(lambda: _wait(orch, "answered g-"))
            entries = _json("cron", "list", *cfg)["entries"]
            by_kind = {entry["kind"]: entry for entry in entries}
            assert by_kind["agent_turn"]["id"] == "poller:nexo:morning"
            assert by_kind["agent_turn"]["permanent"] is True
            prompt = by_kind["prompt"]
            assert (prompt["binding"], prompt["schedule"], prompt["channel"]) == (
                "nexo",
                "cron 30 6 * * *",
                "inbox",
            )
            fired = _json("cron", "fire", prompt["id"], *cfg)
            fire_id = fired["fire"]["id"]
            await anyio.to_thread.run_sync(
                lambda: _wait(orch, f"cron fire {fire_id} of {prompt['id']}: done")
            )
            fires = _json("cron", "list", *cfg)["entries"]
        turns_of_fire = [r for r in llm.requests if "[scheduled" in (r.last_user_text or "")]
    assert len(turns_of_fire) == 1
    assert [t for t in reply_texts(tmp_path) if t == "backups: all 3 fine"] == ["backups: all 3 fine"]
    audit = _json("audit", "tail", "--kind", "cron_fire", *cfg)
    assert [(e["body"]["fire_id"], e["body"]["status"]) for e in audit] == [(str(fire_id), "done")]
    assert next(e for e in fires if e["id"] == prompt["id"])["last_fire"] == "done"


async def test_the_kill_switch_skips_fires_without_a_model_call(tmp_path: Path) -> None:
    with FakeLLM(default=_model) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        cfg = ("--config", str(config))
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server cron ready")
            paused = _json("autonomy", "pause", *cfg)
            assert paused["enabled"] is False
            entry = _json("cron", "list", *cfg)["entries"][0]
            _json("cron", "fire", entry["id"], *cfg)
            await anyio.to_thread.run_sync(lambda: _wait(orch, "skipped: autonomy paused"))
            status = nexo("status", *cfg)
            assert "autonomy: paused" in status.stdout
            resumed = _json("autonomy", "resume", *cfg)
            assert resumed["enabled"] is True
    assert llm.requests == []


async def test_with_nexo_down_the_switch_goes_into_the_ledger_and_status_needs_the_daemon(
    tmp_path: Path,
) -> None:
    with FakeLLM(default=_model) as llm:
        cfg = ("--config", str(_config(tmp_path, llm.openai_base_url)))
        paused = _json("autonomy", "pause", *cfg)
        status = nexo("autonomy", "status", *cfg)
        switched = _json("audit", "tail", "--kind", "config_change", *cfg)
    assert paused == {"enabled": False, "recorded": True, "running": False}
    assert status.returncode == 1
    assert "`nexo autonomy status` needs the daemon (start it with `nexo run`)" in status.stderr
    assert [(e["source"], e["body"]["path"], e["body"]["detail"]) for e in switched] == [
        ("cli", "autonomy.enabled", "paused by cli")
    ]
    assert llm.requests == []
