"""The channel gate in a running mesh, the channel commands, and conversations kept apart."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from shared import unix_socket
from shared.protocol.console_wire import Reply, Say
from tests.fakes.llm import FakeLLM, RecordedRequest, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.fakes.node_channel import installed_server, node
from tests.mesh.console import next_frame, operator
from tests.mesh.harness import chat, nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]


def _config(tmp_path: Path, llm_url: str, **extra: Any) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={"console": python_server("channel_servers.console"), "time": python_server("servers.time")},
        agent={"channels": ["console", "time"]},
        extra=extra,
    )


def test_doctor_names_each_verdict_and_its_fix_with_the_daemon_down_and_up(tmp_path: Path) -> None:
    config = _config(
        tmp_path, "http://127.0.0.1:9/v1", channels={"enabled": True, "approved": [{"server": "console"}]}
    )
    offline = nexo("channel", "doctor", "--config", str(config))
    with (
        FakeLLM([]) as llm,
        running(
            _config(
                tmp_path, llm.openai_base_url, channels={"enabled": True, "approved": [{"server": "console"}]}
            )
        ),
    ):
        online = nexo("channel", "doctor", "--json", "--config", str(config))
        listed = nexo("channel", "list", "--config", str(config))
    assert offline.returncode == 2
    assert offline.stderr.splitlines()[-1] == (
        f"from {config}: nexo is not running, so each server was started once for this check"
    )
    assert offline.stdout.splitlines() == [
        "console      WOULD REGISTER for nexo",
        "time         SKIP capability for nexo: it declares neither nexo/channel nor claude/channel. "
        "Fix: point the binding at a channel server, or remove it from agents[].channels; for a Claude Code "
        "channel server set servers.time.protocol: legacy (it declares its capability the handshake-era way)",
    ]
    verdicts = [(r["server"], r["verdict"], r["kind"]) for r in json.loads(online.stdout)["results"]]
    assert verdicts == [("console", "register", ""), ("time", "skip", "capability")]
    assert listed.stdout.splitlines()[0].startswith("console      nexo/channel")
    assert "bound to nexo" in listed.stdout


def test_with_the_kill_switch_off_no_message_reaches_the_agent(tmp_path: Path) -> None:
    with FakeLLM([ModelReply("should not happen")]) as llm:
        config = _config(
            tmp_path, llm.openai_base_url, channels={"enabled": False, "approved": [{"server": "console"}]}
        )
        with running(config) as orch:
            orch.wait_for_line("console      SKIP disabled for nexo")
            result = chat(config, "anyone there?", timeout=2)
        assert llm.requests == []
    assert result.returncode == 1
    assert "no reply within 2s; the message stays queued" in result.stderr


def test_channel_test_prints_the_session_key_and_the_rendered_message(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    result = nexo(
        "channel",
        "test",
        "console",
        "--content",
        'a "quoted" <tag>',
        "--thread-id",
        "t7",
        "--config",
        str(config),
    )
    unbound = nexo("channel", "test", "time", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "session key (thread scope for nexo): console|thread_id=t7",
        '<channel source="console" chat_id="test-chat" message_id="test-1" thread_id="t7" '
        'user_id="test-user">a "quoted" &lt;tag&gt;</channel>',
    ]
    assert unbound.returncode == 0
    assert json.loads(unbound.stdout)["session_key"] == "time|chat_id=test-chat"


def test_list_and_doctor_report_the_running_daemons_bindings_not_another_config_file(
    tmp_path: Path,
) -> None:
    gate = {"enabled": True, "approved": [{"server": "console"}]}
    daemon = write_config(
        tmp_path / "daemon.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"console": python_server("channel_servers.console"), "time": python_server("servers.time")},
        extra={"channels": gate},
    )
    edited = _config(tmp_path, "http://127.0.0.1:9/v1", channels=gate)
    with running(daemon) as orchestrator:
        listed = nexo("channel", "list", "--json", "--config", str(edited))
        doctor = nexo("channel", "doctor", "--config", str(edited))
        pid = orchestrator.process.pid
    report = json.loads(listed.stdout)
    assert report["source"] == {"running": True, "pid": pid, "config": str(daemon)}
    assert [(row["server"], row["agents"]) for row in report["channels"]] == [("console", ["nexo"])]
    assert (doctor.returncode, doctor.stdout) == (0, "console      WOULD REGISTER for nexo\n")
    assert doctor.stderr.splitlines()[-1] == f"from the running nexo (pid {pid}, config {daemon})"


async def test_two_conversations_never_see_each_others_context(tmp_path: Path) -> None:
    def echo_context(request: RecordedRequest) -> ModelReply:
        seen = " | ".join(m["content"] for m in request.body["messages"] if m["role"] == "user")
        return ModelReply(seen)

    script: list[ScriptItem] = [echo_context] * 4
    with FakeLLM(script) as llm:
        config = _config(
            tmp_path, llm.openai_base_url, channels={"enabled": True, "approved": [{"server": "console"}]}
        )
        with running(config):
            async with (
                operator(tmp_path / "state", chat_id="alice") as alice,
                operator(tmp_path / "state", chat_id="bob") as bob,
            ):
                await alice.send(Say(id="a1", text="alice secret plan"))
                await next_frame(alice, Reply)
                await bob.send(Say(id="b1", text="bob question"))
                bob_first = await next_frame(bob, Reply)
                await alice.send(Say(id="a2", text="alice again"))
                alice_second = await next_frame(alice, Reply)
                await bob.send(Say(id="b2", text="bob again"))
                bob_second = await next_frame(bob, Reply)
    assert "alice" not in bob_first.text
    assert "alice" not in bob_second.text
    assert "bob question" in bob_second.text
    assert "alice secret plan" in alice_second.text
    assert "bob" not in alice_second.text


async def test_a_claude_code_channel_server_works_unmodified(tmp_path: Path) -> None:
    inbox, replies = tmp_path / "inbox.sock", tmp_path / "replies.jsonl"
    seen: list[str] = []

    def answer(request: RecordedRequest) -> ModelReply:
        seen.append(request.last_user_text or "")
        return ModelReply("hi from nexo")

    with FakeLLM([answer]) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "cc": python_server(
                    "tests.fakes.claude_channel",
                    env={"CLAUDE_CHANNEL_INBOX": str(inbox), "CLAUDE_CHANNEL_REPLIES": str(replies)},
                    # Claude Code channels declare experimental capabilities: a handshake-era feature.
                    protocol="legacy",
                )
            },
            agent={"channels": ["cc"]},
            extra={"channel_options": {"cc": {"outbound_tool_name": "reply"}}},
        )
        with running(config) as orch:
            orch.wait_for_line("server cc ready")
            stream = await unix_socket.connect(inbox)
            async with stream:
                await stream.send(
                    b'{"content": "hello from claude", '
                    b'"meta": {"chat_id": "local", "user": "u1", "user_id": "local"}}\n'
                )
            await anyio.to_thread.run_sync(lambda: orch.wait_for_line("answered g-"))
    assert seen == [
        '<channel source="cc" chat_id="local" sender_role="owner" user="u1" user_id="local">'
        "hello from claude</channel>"
    ]
    assert [json.loads(line) for line in replies.read_text().splitlines()] == [
        {"chat_id": "local", "text": "hi from nexo"}
    ]


def _push(meta_id: str, text: str) -> dict[str, Any]:
    return {
        "content": text,
        "meta": {"chat_id": "local", "message_id": meta_id, "user": "u1", "user_id": "local"},
    }


def test_a_typescript_claude_channel_pushing_one_message_three_times_is_answered_once(tmp_path: Path) -> None:
    """The official TypeScript SDK's server pushes m1 right after the handshake (before the intake
    listens), then twice more once it was answered; then m2. Only m1 and m2 are answered."""
    server = installed_server()
    inbox, replies = tmp_path / "inbox.sock", tmp_path / "replies.jsonl"
    answers = iter(("answer to m1", "answer to m2", "a second answer"))
    prompts: list[str] = []

    def answer(request: RecordedRequest) -> ModelReply:
        prompts.append(request.last_user_text or "")
        return ModelReply(next(answers))

    with FakeLLM(default=answer) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "cc": {
                    "transport": "stdio",
                    "command": node(),
                    "args": [str(server)],
                    "env": {
                        "CLAUDE_CHANNEL_FIRST": json.dumps(_push("m1", "hello once")),
                        "CLAUDE_CHANNEL_INBOX": str(inbox),
                        "CLAUDE_CHANNEL_REPLIES": str(replies),
                    },
                    "protocol": "legacy",
                }
            },
            agent={"channels": ["cc"]},
            extra={"channel_options": {"cc": {"outbound_tool_name": "reply"}}},
        )
        with running(config) as orch:
            first = orch.wait_for_line("answered g-")
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(inbox))
                lines = [_push("m1", "hello once"), _push("m1", "hello once"), _push("m2", "and then")]
                client.sendall(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            orch.wait_for_line("answered g-", start=first + 1)
            repeats = [
                line for line in orch.lines if "repeated push of message 'm1' in chat 'local' from cc" in line
            ]
    assert [json.loads(line) for line in replies.read_text().splitlines()] == [
        {"chat_id": "local", "text": "answer to m1"},
        {"chat_id": "local", "text": "answer to m2"},
    ]
    assert [prompt.rsplit(">", 1)[0].rsplit('">', 1)[1] for prompt in prompts] == [
        "hello once</channel",
        "and then</channel",
    ]
    assert len(repeats) == 2
