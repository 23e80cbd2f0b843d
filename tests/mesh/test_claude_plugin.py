"""A Claude Code channel plugin under `nexo run`, as the official ones behave (tests/fakes/claude_channel_ts):
approvals in Claude Code's contract, message identity per chat across a restart, groups told apart from
DMs without a chat_type, the plugin's instructions as channel notes, quotes only in groups."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import CallTool, FakeLLM, Outcome, RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.fakes.node_channel import installed_server, node
from tests.mesh.harness import Orchestrator, nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario]


def _telegram(chat: str, user: str, message_id: str, text: str) -> dict[str, Any]:
    """The official Telegram plugin's push: no chat_type; a DM's chat id is the user's id."""
    meta = {"chat_id": chat, "message_id": message_id, "user": f"u{user}", "user_id": user}
    return {"content": text, "meta": {**meta, "ts": "2026-11-26T00:00:00.000Z"}}


def _send(inbox: Path, *lines: dict[str, Any]) -> None:
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(inbox))
        client.sendall(b"".join(json.dumps(line).encode() + b"\n" for line in lines))


def _config(tmp_path: Path, llm_url: str, verdict: str, *, groups: bool) -> Path:
    """With ``groups``, a pairing server lets every group in (without one, groups never pass)."""
    inbox = tmp_path / "inbox.sock"
    pairing = {"pairing": python_server("servers.pairing")} if groups else {}
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "tg": {
                "transport": "stdio",
                "command": node(),
                "args": [str(installed_server())],
                "env": {
                    "CLAUDE_CHANNEL_INBOX": str(inbox),
                    "CLAUDE_CHANNEL_REPLIES": str(tmp_path / "replies.jsonl"),
                    "CLAUDE_CHANNEL_PERMISSIONS": str(tmp_path / "permissions.jsonl"),
                    "CLAUDE_CHANNEL_VERDICT": verdict,
                    "CLAUDE_CHANNEL_STARTS": str(tmp_path / "starts.txt"),
                    # Where the official plugin keeps access.json: the doctors read it from here.
                    "TELEGRAM_STATE_DIR": str(tmp_path / "plugin"),
                },
                "protocol": "legacy",
            },
            "notes": python_server(
                "tests.fakes.notes_server", env={"NOTES_FILE": str(tmp_path / "notes.txt")}
            ),
            **pairing,
        },
        agent={"channels": ["tg"]},
        extra={
            "operator": {"channel": "tg", "chat_id": "100"},
            "channel_options": {
                "tg": {
                    "outbound_tool_name": "reply",
                    "claude_permission_relay": True,
                    # The plugin asks for a mention in groups itself (access.json): its meta says none.
                    "pairing": {
                        "allow_from": ["100", "200"],
                        "group_policy": "open",
                        "require_mention": False,
                    },
                }
            },
        },
    )


def _model(prompts: list[RecordedRequest]) -> Any:
    def answer(request: RecordedRequest) -> Outcome:
        prompts.append(request)
        if request.tool_results:
            (_, content, is_error), *_ = request.tool_results
            return ModelReply(f"{'refused' if is_error else 'done'}: {content}")
        text = request.last_user_text or ""
        note = re.search(r"note: ([a-z ]+)<", text)
        if note:
            return CallTool("notes__write_note", {"text": note.group(1)})
        return ModelReply("answer to " + text.rsplit('">', 1)[1].split("<", 1)[0])

    return answer


def _answered(orch: Orchestrator, count: int) -> None:
    start = 0
    for _ in range(count):
        start = orch.wait_for_line("answered g-", start=start) + 1


def test_an_official_style_plugin_relays_approvals_and_answers_each_message_once(tmp_path: Path) -> None:
    inbox, prompts = tmp_path / "inbox.sock", list[RecordedRequest]()
    (tmp_path / "plugin").mkdir()
    access = {"dmPolicy": "pairing", "allowFrom": ["100", "200", "300"], "groups": {}, "pending": {}}
    (tmp_path / "plugin" / "access.json").write_text(json.dumps(access))
    with FakeLLM(default=_model(prompts)) as llm:
        with running(_config(tmp_path, llm.openai_base_url, "allow", groups=True)) as orch:
            orch.wait_for_line("server tg ready")
            _send(inbox, _telegram("100", "100", "1", "note: buy milk"))
            _answered(orch, 1)
            _send(inbox, _telegram("200", "200", "1", "same id, other chat"))
            _answered(orch, 2)
            _send(inbox, _telegram("100", "100", "1", "note: buy milk"))
            orch.wait_for_line("repeated push of message '1' in chat '100' from tg")
            # The operator writes in a supergroup: a group, so they speak as a contact there.
            _send(inbox, _telegram("-1005", "100", "7", "hello group"))
            _answered(orch, 3)
            orch.wait_for_line("approval relay to tg stopped")
        with running(_config(tmp_path, llm.openai_base_url, "deny", groups=False)) as orch:
            orch.wait_for_line("server tg ready")
            _send(inbox, _telegram("100", "100", "1", "note: buy milk"))
            orch.wait_for_line("repeated push of message '1' in chat '100' from tg")
            _send(inbox, _telegram("100", "100", "2", "note: sell the car"))
            _answered(orch, 1)
            # The doctors ask the running daemon: no second copy of the plugin (one poller per token).
            config = str(tmp_path / "agents.yaml")
            doctors = [
                nexo(*args, "--config", config) for args in (("channel", "doctor"), ("setup", "doctor"))
            ]
            checked = nexo("run", "--check-config", "--config", config)
    assert (tmp_path / "starts.txt").read_text().count("\n") == 2
    assert checked.returncode == 0, checked.stderr
    for doctor in doctors:
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        assert "WARNING claude.double_gate" in doctor.stdout
        assert "300 are not owners here: their answers would count as the operator's" in doctor.stdout

    replies = [json.loads(line) for line in (tmp_path / "replies.jsonl").read_text().splitlines()]
    assert replies == [
        {"chat_id": "100", "text": 'done: {"result": "wrote 8 characters"}'},
        {"chat_id": "200", "text": "answer to same id, other chat"},
        {"chat_id": "-1005", "text": "answer to hello group", "reply_to": "7"},
        {"chat_id": "100", "text": replies[3]["text"]},
    ]
    assert replies[3]["text"].startswith("refused: ")
    assert "the operator denied notes__write_note" in replies[3]["text"]
    assert (tmp_path / "notes.txt").read_text() == "buy milk\n"
    asked = [json.loads(line) for line in (tmp_path / "permissions.jsonl").read_text().splitlines()]
    assert [(a["tool_name"], json.loads(a["input_preview"])) for a in asked] == [
        ("notes__write_note", {"text": "buy milk"}),
        ("notes__write_note", {"text": "sell the car"}),
    ]
    assert all(re.fullmatch(r"[a-km-z]{5}", a["request_id"]) for a in asked)
    assert all(a["description"].startswith('for tg chat "100", sender "100" (owner)') for a in asked)
    roles = [re.search(r'sender_role="(\w+)"', p.last_user_text or "") for p in prompts if not p.tool_results]
    assert [m.group(1) if m else None for m in roles] == ["owner", "owner", "contact", "owner"]
    system = prompts[0].system or ""
    assert system.index('<channel_notes source="tg">') > 0
    assert "Use reply_to only when replying to an earlier message" in system
