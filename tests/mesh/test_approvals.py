"""Approvals end to end: a tool with a side effect asks on the console; the answer decides.

The first scenario runs twice: with the console as the orchestrator's stdio child, and with it as its
own ``nexo serve console --http`` process reached over Streamable HTTP with a bearer token, where the
prompt, the operator's answer and the verdict take the same course.
"""

from __future__ import annotations

import json
import signal
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from shared.protocol.console_wire import Approval, Error, Queued, Reply, Say, Verdict
from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.console import next_frame
from tests.mesh.console import operator as open_operator
from tests.mesh.harness import (
    free_port,
    http_console,
    http_server_entry,
    python_server,
    running,
    write_config,
)

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


TOKEN = "approvals-http-token"


def _config(
    tmp_path: Path,
    llm_url: str,
    notes: Path,
    timeout_s: float = 600.0,
    console: dict[str, Any] | None = None,
) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "console": console or python_server("channel_servers.console"),
            "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)}),
        },
        extra={"channel_options": {"console": {"approval_timeout_s": timeout_s}}},
    )


def _tool_result(request: RecordedRequest) -> tuple[str, bool]:
    (_, content, is_error), *_ = request.tool_results
    return content, is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_approved_call_runs_and_a_denied_one_does_not(tmp_path: Path, transport: str) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[tuple[str, bool]] = []

    def report(request: RecordedRequest) -> ModelReply:
        seen.append(_tool_result(request))
        return ModelReply(f"result: {seen[-1][0]}")

    script: list[ScriptItem] = [
        CallTool("notes__write_note", {"text": "buy milk"}),
        report,
        CallTool("notes__write_note", {"text": "sell the car"}),
        report,
    ]
    with ExitStack() as stack:
        llm = stack.enter_context(FakeLLM(script))
        console = None
        if transport == "http":
            port = free_port()
            stack.enter_context(http_console(port, tmp_path / "state", TOKEN))
            console = http_server_entry(port, TOKEN)
        stack.enter_context(running(_config(tmp_path, llm.openai_base_url, notes, console=console)))
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="note: buy milk"))
            await next_frame(operator, Queued)
            asked = await next_frame(operator, Approval)
            assert asked.tool_name == "notes__write_note"
            assert "buy milk" in asked.input_preview
            await operator.send(Say(id="a1", text=f"yes {asked.request_id}"))
            verdict = await next_frame(operator, Verdict)
            assert (verdict.request_id, verdict.behavior) == (asked.request_id, "allow")
            first = await next_frame(operator, Reply)

            await operator.send(Say(id="m2", text="note: sell the car"))
            asked_again = await next_frame(operator, Approval)
            assert asked_again.request_id != asked.request_id
            await operator.send(Say(id="a2", text=f"no {asked_again.request_id}"))
            assert (await next_frame(operator, Verdict)).behavior == "deny"
            second = await next_frame(operator, Reply)

            # The id was single use: answering it again is refused by the console.
            await operator.send(Say(id="a3", text=f"yes {asked.request_id}"))
            refused = await next_frame(operator, Error)
    assert (first.reply_to, first.text) == ("m1", 'result: {"result": "wrote 8 characters"}')
    assert notes.read_text() == "buy milk\n"
    assert second.reply_to == "m2"
    content, is_error = seen[1]
    assert is_error
    assert "denied" in content
    assert refused.message == f"no pending approval {asked.request_id!r} (answered or expired)"


async def test_an_unanswered_approval_times_out_as_a_deny(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[tuple[str, bool]] = []

    def report(request: RecordedRequest) -> ModelReply:
        seen.append(_tool_result(request))
        return ModelReply("could not write it")

    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "x"}), report]
    with FakeLLM(script) as llm:
        config = _config(tmp_path, llm.openai_base_url, notes, timeout_s=1.0)
        with running(config):
            async with open_operator(tmp_path / "state") as operator:
                await operator.send(Say(id="m1", text="note x"))
                await next_frame(operator, Approval)
                reply = await next_frame(operator, Reply)
    assert reply.text == "could not write it"
    content, is_error = seen[0]
    assert is_error
    assert "no answer within 1s" in content
    assert not notes.exists()


async def test_a_read_only_tool_runs_without_asking(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("old note\n")
    script: list[ScriptItem] = [
        CallTool("notes__read_notes", {}),
        lambda request: ModelReply(json.loads(_tool_result(request)[0])["result"].strip()),
    ]
    with FakeLLM(script) as llm, running(_config(tmp_path, llm.openai_base_url, notes)):
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="read my notes"))
            frame = await next_frame(operator, Reply | Approval)  # type: ignore[arg-type]
    assert isinstance(frame, Reply)
    assert frame.text == "old note"


async def test_a_restart_while_waiting_is_a_deny_and_the_old_id_never_approves_the_new_prompt(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    first = FakeLLM([CallTool("notes__write_note", {"text": "first try"})])
    with first as llm, running(_config(tmp_path, llm.openai_base_url, notes)) as orch:
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="note it"))
            old = await next_frame(operator, Approval)
        orch.process.send_signal(signal.SIGKILL)
        orch.process.wait(30)
    assert not notes.exists()
    script: list[ScriptItem] = [CallTool("notes__write_note", {"text": "first try"}), ModelReply("written")]
    with FakeLLM(script) as llm, running(_config(tmp_path, llm.openai_base_url, notes)):
        async with open_operator(tmp_path / "state") as operator:
            new = await next_frame(operator, Approval)  # the unacknowledged message is asked about again
            await operator.send(Say(id="a-old", text=f"yes {old.request_id}"))
            refused = await next_frame(operator, Error)
            await operator.send(Say(id="a-new", text=f"yes {new.request_id}"))
            reply = await next_frame(operator, Reply)
    assert new.request_id != old.request_id
    assert refused.message == f"no pending approval {old.request_id!r} (answered or expired)"
    assert (reply.reply_to, reply.text) == ("m1", "written")
    assert notes.read_text() == "first try\n"


async def test_an_answer_from_a_sender_who_is_not_an_approver_of_the_channel_does_not_count(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[tuple[str, bool]] = []

    def report(request: RecordedRequest) -> ModelReply:
        seen.append(_tool_result(request))
        return ModelReply("not written")

    with FakeLLM([CallTool("notes__write_note", {"text": "x"}), report]) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)}),
            },
            extra={"channel_options": {"console": {"approval_timeout_s": 2, "approvers": ["alice"]}}},
        )
        with running(config) as orch:
            async with open_operator(tmp_path / "state") as operator:
                await operator.send(Say(id="m1", text="note x"))
                asked = await next_frame(operator, Approval)
                await operator.send(Say(id="a1", text=f"yes {asked.request_id}"))
                reply = await next_frame(operator, Reply)
            log = orch.log()
    assert (
        f"approval answer for {asked.request_id} from 'operator' on console refused: not an approver" in log
    )
    assert reply.text == "not written"
    assert seen[0][1]
    assert "no answer within 2s" in seen[0][0]
    assert not notes.exists()


async def test_a_call_with_invalid_arguments_is_answered_to_the_model_without_asking(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[tuple[str, bool]] = []

    def report(request: RecordedRequest) -> ModelReply:
        seen.append(_tool_result(request))
        return ModelReply("fixing my call")

    script: list[ScriptItem] = [CallTool("notes__write_note", {"txt": "buy milk"}), report]
    with FakeLLM(script) as llm, running(_config(tmp_path, llm.openai_base_url, notes)):
        async with open_operator(tmp_path / "state") as operator:
            await operator.send(Say(id="m1", text="note: buy milk"))
            await next_frame(operator, Queued)
            frame = await next_frame(operator, Reply | Approval)  # type: ignore[arg-type]
    assert isinstance(frame, Reply)
    assert seen == [("invalid arguments for notes__write_note:\n- text: required but missing", True)]
    assert not notes.exists()
