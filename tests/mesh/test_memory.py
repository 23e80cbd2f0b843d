"""The memory server in the mesh: sessions survive a restart, tools act for the right agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from shared.protocol.console_wire import Approval, Say
from shared.protocol.console_wire import Reply as ConsoleReply
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Reply, ScriptItem
from tests.mesh.console import next_frame, operator
from tests.mesh.harness import chat, nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _config(tmp_path: Path, llm_url: str, **agent: Any) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "console": python_server("channel_servers.console"),
            "memory": python_server("servers.memory"),
        },
        agent=agent or None,
    )


def _texts(request: RecordedRequest) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request.body["messages"] if isinstance(m.get("content"), str)]


async def test_a_restarted_orchestrator_reattaches_to_the_conversation(tmp_path: Path) -> None:
    with FakeLLM([Reply("Nice to meet you, Ada.")]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config):
            first = chat(config, "my name is Ada")
    with FakeLLM([Reply("You are Ada.")]) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        with running(config):
            second = chat(config, "what is my name?")
        (request,) = llm.requests
    assert first.stdout == "Nice to meet you, Ada.\n"
    assert second.stdout == "You are Ada.\n"
    history = _texts(request)
    assert [role for role, _ in history] == ["system", "user", "assistant", "user"]
    assert history[1][1].endswith(">my name is Ada</channel>")
    assert history[2][1] == "Nice to meet you, Ada."


async def test_memory_tools_act_for_the_calling_agent_and_extraction_is_recorded(tmp_path: Path) -> None:
    script: list[ScriptItem] = [
        CallTool("memory__memory_remember", {"content": "The operator's dog is called Rex", "kind": "fact"}),
        Reply("Noted."),
        Reply('[{"content": "The operator prefers tea", "tags": ["drinks"]}]'),
    ]
    with FakeLLM(script) as llm:
        config = _config(tmp_path, llm.openai_base_url, memory={"extract": True})
        with running(config) as orch:
            async with operator(tmp_path / "state") as session:
                await session.send(Say(id="m1", text="remember my dog Rex; and I prefer tea"))
                # Writing to memory is not read-only: until a policy allows it, the operator approves.
                asked = await next_frame(session, Approval)
                await session.send(Say(id="a1", text=f"yes {asked.request_id}"))
                answered = await next_frame(session, ConsoleReply)
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("memory extraction stored 1 memories"))
        stored = nexo("memory", "list", "--json", "--config", str(config))
        found = nexo("memory", "search", "dog", "--json", "--config", str(config))
    assert asked.tool_name == "memory__memory_remember"
    assert answered.text == "Noted."
    assert stored.returncode == 0, stored.stderr
    payload = json.loads(stored.stdout)
    records = payload["memories"] if isinstance(payload, dict) else payload
    by_content = {r["content"]: r for r in records}
    rex = by_content["The operator's dog is called Rex"]
    assert (rex["agent"], rex["provenance"]) == ("nexo", "owner")
    assert by_content["The operator prefers tea"]["provenance"] == "agent"
    assert found.returncode == 0, found.stderr
    assert "Rex" in found.stdout
