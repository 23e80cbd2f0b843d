"""Webhook events reach the agent, in a running mesh: the quick start of docs/webhooks.md followed
literally gets one model turn per event, and a sender-less event on a channel that refuses them is
never lost silently (audited, counted, shown by `nexo status` and `nexo channel doctor`, told to the
operator once per source)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from tests.fakes.llm import FakeLLM, RecordedRequest
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.harness import REPO, Orchestrator, free_port, nexo, python_server, running, write_config
from tests.mesh.inbox import inbox_server, reply_texts

pytestmark = pytest.mark.scenario

SECRET = "quick-start-secret"


def _quick_start() -> list[tuple[str, str]]:
    """The fenced blocks of the quick start section, as (language, text), in order."""
    text = (REPO / "docs" / "webhooks.md").read_text()
    section = text.split("## Quick start: GitHub", 1)[1].split("\n## ", 1)[0]
    return [
        (lang, re.sub(r"^   ", "", body, flags=re.MULTILINE))
        for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, flags=re.DOTALL)
    ]


def _post_signed(
    port: int, delivery: str, event: str, body: bytes, *, source: str = "github"
) -> httpx2.Response:
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={signature}",
    }
    return httpx2.post(f"http://127.0.0.1:{port}/hooks/{source}", content=body, headers=headers)


def _wait_answered(orch: Orchestrator, count: int) -> None:
    start = 0
    for _ in range(count):
        start = orch.wait_for_line("answered g-", timeout=60, start=start) + 1


def test_the_quick_start_followed_literally_gets_one_model_turn_per_event(tmp_path: Path) -> None:
    blocks = _quick_start()
    assert [lang for lang, _ in blocks] == ["sh", "yaml", "yaml", "sh"]
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "webhooks.yaml").write_text(blocks[1][1])
    step3: dict[str, Any] = yaml.safe_load(blocks[2][1])
    port = free_port()
    # The one change to the text: a free port instead of 8787, so tests can run side by side.
    step3["servers"]["webhook"]["env"]["NEXO_WEBHOOK_PORT"] = str(port)
    agent = {k: v for k, v in step3["agents"][0].items() if k != "id"}
    prompts: list[str] = []

    def note(request: RecordedRequest) -> ModelReply:
        prompts.append(request.last_user_text or "")
        return ModelReply("noted")

    with FakeLLM(default=note) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={"console": python_server("channel_servers.console"), **step3["servers"]},
            agent=agent,
            extra={"channels": step3["channels"], "channel_options": step3["channel_options"]},
        )
        env = {"GITHUB_WEBHOOK_SECRET": SECRET}
        with running(config, env=env, cwd=tmp_path) as orch:
            orch.wait_for_line("server webhook ready")
            script = blocks[3][1].replace("127.0.0.1:8787", f"127.0.0.1:{port}")
            first, again = (
                subprocess.run(
                    ["bash", "-c", script],
                    env={"GITHUB_WEBHOOK_SECRET": SECRET, "PATH": "/usr/bin:/bin"},
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
                for _ in range(2)
            )
            issue = json.dumps({"action": "opened", "issue": {"number": 7}}).encode()
            second = _post_signed(port, "test-2", "issues", issue)
            _wait_answered(orch, 2)
            doctor = nexo("channel", "doctor", "--config", str(config), env=env)
            status_run = nexo("status", "--json", "--config", str(config), env=env)
    assert first.stdout.startswith("HTTP/1.1 202"), first.stdout + first.stderr
    assert first.stdout.endswith('{"duplicate":false,"delivery_id":"test-1"}')
    assert again.stdout.startswith("HTTP/1.1 200")
    assert again.stdout.endswith('{"duplicate":true,"delivery_id":"test-1"}')
    assert second.status_code == 202
    assert len(prompts) == 2
    for prompt, kind in zip(prompts, ("ping", "issues"), strict=True):
        assert prompt.startswith('<channel source="webhook" chat_id="github" ')
        assert f'event_kind="{kind}"' in prompt
        assert 'principal="webhook:github" sender_role="source">' in prompt
    assert "Design for failure." in prompts[0]
    assert status_run.returncode == 0, status_run.stderr
    status = json.loads(status_run.stdout)
    assert doctor.returncode == 0, doctor.stdout
    assert "webhook      WOULD REGISTER for nexo" in doctor.stdout
    assert status["refused"] == []


def test_a_sender_less_event_on_a_channel_that_refuses_them_is_recorded_counted_shown_and_told_once(
    tmp_path: Path,
) -> None:
    sources = [
        {"name": name, "path": f"/hooks/{name}", "scheme": "github", "secret_env": "GH_SECRET"}
        for name in ("github", "ci")
    ]
    port = free_port()
    with FakeLLM(default=ModelReply("must not happen")) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "inbox": inbox_server(tmp_path),
                "audit": python_server("servers.audit"),
                "webhook": python_server(
                    "channel_servers.webhook",
                    env={
                        "NEXO_WEBHOOK_SOURCES": json.dumps(sources),
                        "NEXO_WEBHOOK_PORT": str(port),
                        "GH_SECRET": SECRET,
                    },
                ),
            },
            agent={"channels": ["inbox", "webhook"]},
            extra={"operator": {"channel": "inbox", "chat_id": "op"}},
        )
        with running(config) as orch:
            orch.wait_for_line("server webhook ready")
            for n, source in enumerate(("github", "github", "ci")):
                body = json.dumps({"zen": f"event {n}"}).encode()
                assert _post_signed(port, f"d-{n}", "ping", body, source=source).status_code == 202
            # Events are taken in order: the first refusal of ci comes after both of github.
            orch.wait_for_line("refused a webhook event (source ci)")
            for source in ("github", "ci"):
                orch.wait_for_line(f"told the operator on inbox (refused:webhook:no_sender:{source})")
            status = nexo("status", "--config", str(config))
            status_json = json.loads(nexo("status", "--json", "--config", str(config)).stdout)
            doctor = nexo("channel", "doctor", "--config", str(config))
            ledger = nexo("audit", "tail", "--kind", "pairing", "--json", "--config", str(config))
        assert llm.requests == []
    refused = [(r["server"], r["reason"], r["source"], r["count"]) for r in status_json["refused"]]
    assert refused == [("webhook", "no_sender", "ci", 1), ("webhook", "no_sender", "github", 2)]
    line = "webhook      REFUSED 2 events for carrying no sender id (source github). Fix: if the server"
    assert status.returncode == 2
    assert line in status.stdout
    assert doctor.returncode == 2
    assert "webhook      WOULD REGISTER for nexo" in doctor.stdout
    assert line in doctor.stdout
    assert "no_sender: source" in doctor.stdout
    entries = [e for e in json.loads(ledger.stdout) if e["body"]["channel"] == "webhook"]
    assert sorted((e["body"]["action"], e["body"]["detail"], e["body"]["sender"]) for e in entries) == [
        ("refused", "no_sender", "source:ci"),
        ("refused", "no_sender", "source:github"),
        ("refused", "no_sender", "source:github"),
    ]
    notices = sorted(text for text in reply_texts(tmp_path) if text.startswith("[refused]"))
    assert [notice.split(" did not")[0] for notice in notices] == [
        "[refused] webhook: an event carrying no sender id (source ci)",
        "[refused] webhook: an event carrying no sender id (source github)",
    ]
