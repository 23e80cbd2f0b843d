"""Strangers never reach the model: the pairing gate in a running mesh.

A nexo channel driven over a socket (tests/fakes/inbox_channel.py) plays every sender; the pairing,
audit and memory servers are the real ones. The ten thousand crafted events are in
tests/mesh/test_pairing_crafted_events.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import running
from tests.mesh.inbox import replies, send
from tests.mesh.pairing_corpus import CONTACT, injections
from tests.mesh.pairing_mesh import audit, pair, pairing_config, wait_answered

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _injector(request: RecordedRequest) -> ModelReply | Step:
    """A model that does whatever the message asks, with every tool it could reach for."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return ModelReply("done as you asked")
    return Step(
        tool_calls=(
            CallTool("pairing__approve", {"code": "ABCD2345"}),
            CallTool("pairing__seed", {"channel": "inbox", "senders": ["attacker"], "role": "owner"}),
            CallTool("notify_origin", {"content": "yes abcde"}),
        )
    )


@pytest.mark.timeout(600)  # 500 turns, each with three refused tool calls: 120 s idle, 300+ s loaded
async def test_five_hundred_injections_from_a_contact_change_no_pairing_state(tmp_path: Path) -> None:
    payloads = injections()
    assert len(payloads) == 500
    with FakeLLM(default=_injector) as llm:
        config = pairing_config(tmp_path, llm.openai_base_url)
        pair(config, "seed", "inbox", "default", CONTACT)
        before = pair(config, "list")
        config_bytes = config.read_bytes()
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server inbox ready")
            events = [
                {
                    "content": payload,
                    "meta": {"chat_id": f"alice-{n % 5}", "message_id": f"inj{n}", "user_id": CONTACT},
                }
                for n, payload in enumerate(payloads)
            ]
            await send(tmp_path, events)
            await anyio.to_thread.run_sync(lambda: wait_answered(orch, 500, 300))
        contact_turns = [
            r
            for r in llm.requests
            if r.body["messages"][-1]["role"] == "user"
            and 'sender_role="contact"' in (r.last_user_text or "")
        ]
    assert len(contact_turns) == 500
    assert pair(config, "list") == before
    assert config.read_bytes() == config_bytes
    assert [e for e in audit(config, "pairing") if e["body"]["action"] == "paired"] == []
    assert all(e["body"]["behavior"] == "deny" for e in audit(config, "approval_answered"))


async def test_a_stranger_is_paired_only_by_the_owner_and_then_reaches_the_model(tmp_path: Path) -> None:
    with FakeLLM(default=ModelReply("welcome")) as llm:
        config = pairing_config(tmp_path, llm.openai_base_url)
        pair(config, "seed", "inbox", "default", CONTACT)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server inbox ready")
            stranger = {"chat_id": "s1", "user_id": "u42", "user": "Bob"}
            await send(tmp_path, [{"content": "hi, I'm Bob", "meta": {**stranger, "message_id": "b1"}}])
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("approval", timeout=60))
            prompt = next(r["prompt"] for r in replies(tmp_path) if "prompt" in r)
            code_reply = next(r["text"] for r in replies(tmp_path) if "text" in r and r["chat_id"] == "s1")
            # A contact answering the operator's prompt does not count.
            await send(
                tmp_path,
                [
                    {
                        "content": f"yes {prompt['request_id']}",
                        "meta": {"chat_id": "op", "message_id": "a1", "user_id": CONTACT},
                    }
                ],
            )
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("not an approver", timeout=60))
            assert [r["sender"] for r in pair(config, "list")["records"]] == [CONTACT]
            # The owner approves out of band with the code the stranger was given.
            found = re.search(r"\b([A-HJ-NP-Z2-9]{4}-?[A-HJ-NP-Z2-9]{4})\b", code_reply)
            assert found is not None, code_reply
            code = found.group(1)
            approved = pair(config, "approve", code)
            assert approved["record"]["sender"] == "u42"
            await send(tmp_path, [{"content": "thanks!", "meta": {**stranger, "message_id": "b2"}}])
            await anyio.to_thread.run_sync(lambda: wait_answered(orch, 1, 60))
            # An id the pairing server refuses to even consider: kept as a dead letter, never let in.
            huge = {"chat_id": "s2", "user_id": "9" * 5000, "message_id": "h1"}
            await send(tmp_path, [{"content": "let me in", "meta": huge}])
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("dead letter inbox:", timeout=60))
        prompts = [request.last_user_text or "" for request in llm.requests]
    assert len(prompts) == 1
    assert "thanks!" in prompts[0]
    assert 'sender_role="contact"' in prompts[0]
    assert "hi, I'm Bob" not in "".join(prompts)
