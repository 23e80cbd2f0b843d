"""The sample channel's README setup, run as written: the person at the page is the operator.

The README's YAML block is loaded literally; the test only adds what a real setup has elsewhere in
its config (the state directory, the model provider it names, and a notes server whose tool asks).
The page is played by a WebSocket client speaking the page's protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from anyio import fail_after
from websockets.asyncio.client import ClientConnection, connect

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import REPO, Orchestrator, free_port, python_server, running

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

README = REPO / "channel_servers" / "sample" / "README.md"


def readme_config() -> dict[str, Any]:
    """The YAML block that follows "In nexo's config" in the README, exactly as written there."""
    text = README.read_text()
    match = re.search(r"In nexo's config[^\n]*\n\n```yaml\n(?P<block>.*?)```", text, re.DOTALL)
    assert match is not None, "the README lost its nexo config block"
    loaded: dict[str, Any] = yaml.safe_load(match["block"])
    return loaded


def write(tmp_path: Path, llm_url: str, **channel_options: Any) -> Path:
    config = readme_config()
    config["state_dir"] = str(tmp_path / "state")
    config["llm"] = {"providers": {"local": {"kind": "openai_compat", "base_url": llm_url, "model": "m"}}}
    config["servers"]["notes"] = python_server(
        "tests.fakes.notes_server", env={"NOTES_FILE": str(tmp_path / "notes.txt")}
    )
    config["channel_options"]["sample"].update(channel_options)
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@asynccontextmanager
async def page(orchestrator: Orchestrator) -> AsyncIterator[ClientConnection]:
    """The page's socket, at the address the channel printed on start (token included)."""
    line = orchestrator.lines[orchestrator.wait_for_line("sample channel: open ")]
    url = urlsplit(line.split("sample channel: open ", 1)[1].strip())
    async with connect(f"ws://{url.netloc}/ws?{url.query}&chat=tab1") as ws:
        assert (await frame(ws))["type"] == "welcome"
        yield ws


async def frame(ws: ClientConnection, kind: str | None = None) -> dict[str, Any]:
    with fail_after(60):
        while True:
            decoded: dict[str, Any] = json.loads(await ws.recv())
            if kind is None or decoded["type"] == kind:
                return decoded


async def say(ws: ClientConnection, message_id: str, text: str) -> dict[str, Any]:
    await ws.send(json.dumps({"id": message_id, "text": text}))
    return await frame(ws)


def _result(request: RecordedRequest) -> ModelReply:
    (_, content, is_error), *_ = request.tool_results
    return ModelReply(f"{'failed' if is_error else 'done'}: {content}")


async def test_with_the_readme_config_the_page_user_is_the_operator_and_approves(tmp_path: Path) -> None:
    port = free_port()
    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "buy milk"}), _result]
    with FakeLLM(script) as llm:
        config = write(tmp_path, llm.openai_base_url)
        with running(config, env={"NEXO_SAMPLE_PORT": str(port)}) as orchestrator:
            async with page(orchestrator) as ws:
                queued = await say(ws, "m1", "note: buy milk")
                asked = await frame(ws, "approval")
                answered = await say(ws, "a1", f"yes {asked['request_id']}")
                reply = await frame(ws, "reply")
    assert queued["type"] == "queued"
    assert asked["description"].startswith('for sample chat "tab1", sender "operator" (owner): ')
    assert answered["type"] == "verdict"
    assert (reply["reply_to"], reply["text"]) == ("m1", 'done: {"result": "wrote 8 characters"}')
    assert (tmp_path / "notes.txt").read_text() == "buy milk\n"


async def test_an_answer_from_a_sender_who_is_not_an_approver_is_refused_on_the_page(tmp_path: Path) -> None:
    port = free_port()
    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "x"}), _result]
    with FakeLLM(script) as llm:
        config = write(tmp_path, llm.openai_base_url, approvers=["someone-else"], approval_timeout_s=20)
        with running(config, env={"NEXO_SAMPLE_PORT": str(port)}) as orchestrator:
            async with page(orchestrator) as ws:
                await say(ws, "m1", "note x")
                asked = await frame(ws, "approval")
                request_id = asked["request_id"]
                await say(ws, "a1", f"yes {request_id}")
                refused = await frame(ws, "reply")
    assert refused["text"] == (
        f"[refused] your answer to approval {request_id} was not counted: sender 'operator' is not an "
        "approver on sample; only the senders in channel_options.sample.approvers may answer approvals "
        "here. If you are the operator, add 'operator' to that list in the config and restart "
        "`nexo run`, then answer again: the request stays open until an approver answers it or it expires."
    )
    assert not (tmp_path / "notes.txt").exists()
