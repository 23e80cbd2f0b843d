"""Strangers never reach the model: the pairing gate in a running mesh.

A nexo channel driven over a socket (tests/fakes/inbox_channel.py) plays every sender; the pairing,
audit and memory servers are the real ones.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, Step
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import Orchestrator, nexo, python_server, running, status, write_config
from tests.mesh.inbox import inbox_server, replies, send
from tests.mesh.pairing_corpus import CLAIMED_SOURCES, CONTACT, CORPUS_SIZE, OWNER, corpus, injections

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _config(tmp_path: Path, llm_url: str, **pairing: Any) -> Path:
    state = tmp_path / "state"
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=state,
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path, NEXO_INBOX_MAX_PENDING="20000"),
            "pairing": python_server("servers.pairing"),
            "audit": python_server("servers.audit"),
            "memory": python_server("servers.memory"),
        },
        agent={"channels": ["inbox"]},
        extra={
            "operator": {"channel": "inbox", "chat_id": "op"},
            "channel_options": {
                "inbox": {
                    "rate_per_minute": None,
                    "approval_timeout_s": 60,
                    "pairing": {"policy": "pairing", "allow_from": [OWNER], **pairing},
                }
            },
        },
    )


def _pair(config: Path, *args: str) -> dict[str, Any]:
    result = nexo("pair", *args, "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _sentinel(text: str = "owner checks in") -> dict[str, Any]:
    return {"content": text, "meta": {"chat_id": "op", "message_id": f"sentinel-{text}", "user_id": OWNER}}


def _wait_answered(orch: Orchestrator, count: int, timeout: float) -> None:
    start = 0
    for _ in range(count):
        start = orch.wait_for_line("answered g-", timeout=timeout, start=start) + 1


def _audit(config: Path, kind: str) -> list[dict[str, Any]]:
    result = nexo("audit", "tail", "--kind", kind, "-n", "1000", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    entries: list[dict[str, Any]] = json.loads(result.stdout)
    return entries


def _transcript_rows(state: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(state / "memory" / "memory.db") as db:
        return db.execute(
            "SELECT s.session_key, t.role FROM transcript t "
            "JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
        ).fetchall()


def _memories(state: Path) -> int:
    with sqlite3.connect(state / "memory" / "memory.db") as db:
        return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])


@pytest.mark.timeout(900)  # 10,000 events through the real servers: 330-400 s on 2 cores
async def test_ten_thousand_crafted_events_cause_no_turn_no_memory_write_and_no_bypass(
    tmp_path: Path,
) -> None:
    events = list(corpus())
    assert len(events) == CORPUS_SIZE
    kinds = Counter(kind for kind, _ in events)
    print(f"\ncrafted events by kind: {dict(sorted(kinds.items()))}")
    with FakeLLM(default=ModelReply("ok")) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        _pair(config, "seed", "inbox", "default", CONTACT)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server inbox ready")
            await send(tmp_path, [event for _, event in events] + [_sentinel()])
            # The pump takes events in order: the owner's message last means every crafted one was decided.
            await anyio.to_thread.run_sync(lambda: _wait_answered(orch, 1, 300))
            refused = (await anyio.to_thread.run_sync(status, config))["refused"]
        prompts = [request.last_user_text or "" for request in llm.requests]
    by_reason = Counter[str]()
    for row in refused:
        by_reason[row["reason"]] += row["count"]
    print(f"refused by reason: {dict(sorted(by_reason.items()))}")
    # Every event without a sender id is refused and counted, whatever source or principal it claims.
    assert by_reason["no_sender"] == kinds["missing_id"] + kinds["sourceless_claim"]
    assert {r["source"] for r in refused if r["reason"] == "no_sender"} == {"-", *CLAIMED_SOURCES}
    assert len(prompts) == 1
    assert "owner checks in" in prompts[0]
    assert 'sender_role="owner"' in prompts[0]
    state = tmp_path / "state"
    assert {key for key, _ in _transcript_rows(state)} == {"inbox|chat_id=op"}
    assert _memories(state) == 0
    listed = _pair(config, "list")
    assert [(r["sender"], r["role"]) for r in listed["records"]] == [(CONTACT, "contact")]
    assert len(listed["pending"]) <= 3
    assert all(p["sender"].startswith("u") and p["sender"] not in (OWNER, CONTACT) for p in listed["pending"])
    texts = [reply["text"] for reply in replies(tmp_path) if "text" in reply]
    codes = [text for text in texts if "nexo pair approve" in text]
    notices = [text for text in texts if text.startswith("[refused] inbox: ")]
    # One notice per refused source (per reason for senders), none for the gate's routine refusals.
    told = [r for r in refused if r["reason"] not in ("mention_required", "code_rate", "pending_full")]
    assert len(notices) == len(told)
    assert [t for t in texts if t not in notices] == [*codes, "ok"]
    assert len(codes) <= 3 * 2  # three pending senders at most, two replies each
    assert len(_audit(config, "turn")) == 1


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


@pytest.mark.timeout(300)
async def test_five_hundred_injections_from_a_contact_change_no_pairing_state(tmp_path: Path) -> None:
    payloads = injections()
    assert len(payloads) == 500
    with FakeLLM(default=_injector) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        _pair(config, "seed", "inbox", "default", CONTACT)
        before = _pair(config, "list")
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
            await anyio.to_thread.run_sync(lambda: _wait_answered(orch, 500, 300))
        contact_turns = [
            r
            for r in llm.requests
            if r.body["messages"][-1]["role"] == "user"
            and 'sender_role="contact"' in (r.last_user_text or "")
        ]
    assert len(contact_turns) == 500
    assert _pair(config, "list") == before
    assert config.read_bytes() == config_bytes
    assert [e for e in _audit(config, "pairing") if e["body"]["action"] == "paired"] == []
    assert all(e["body"]["behavior"] == "deny" for e in _audit(config, "approval_answered"))


async def test_a_stranger_is_paired_only_by_the_owner_and_then_reaches_the_model(tmp_path: Path) -> None:
    with FakeLLM(default=ModelReply("welcome")) as llm:
        config = _config(tmp_path, llm.openai_base_url)
        _pair(config, "seed", "inbox", "default", CONTACT)
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
            assert [r["sender"] for r in _pair(config, "list")["records"]] == [CONTACT]
            # The owner approves out of band with the code the stranger was given.
            found = re.search(r"\b([A-HJ-NP-Z2-9]{4}-?[A-HJ-NP-Z2-9]{4})\b", code_reply)
            assert found is not None, code_reply
            code = found.group(1)
            approved = _pair(config, "approve", code)
            assert approved["record"]["sender"] == "u42"
            await send(tmp_path, [{"content": "thanks!", "meta": {**stranger, "message_id": "b2"}}])
            await anyio.to_thread.run_sync(lambda: _wait_answered(orch, 1, 60))
            # An id the pairing server refuses to even consider: kept as a dead letter, never let in.
            huge = {"chat_id": "s2", "user_id": "9" * 5000, "message_id": "h1"}
            await send(tmp_path, [{"content": "let me in", "meta": huge}])
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("dead letter inbox:", timeout=60))
        prompts = [request.last_user_text or "" for request in llm.requests]
    assert len(prompts) == 1
    assert "thanks!" in prompts[0]
    assert 'sender_role="contact"' in prompts[0]
    assert "hi, I'm Bob" not in "".join(prompts)
