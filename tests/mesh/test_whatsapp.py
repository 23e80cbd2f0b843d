"""WhatsApp end to end: the real mesh with the WhatsApp channel server, the Cloud API stand-in as Meta.

A stranger is paired by the operator before reaching the model, then answered in the same chat;
a tool that needs approval shows Approve / Deny buttons on the operator's phone, a press by anyone
else is refused, and the operator's press runs the tool once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.fakes.llm import CallTool, FakeLLM, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.fakes.whatsapp_api import APP_SECRET, PHONE_NUMBER_ID, TOKEN, FakeWhatsApp, serve
from tests.mesh.harness import Orchestrator, free_port, nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

OPERATOR = "15551230001"
STRANGER = "15551239999"
VERIFY_TOKEN = "verify-scenario"


def whatsapp_server(fake: FakeWhatsApp, port: int) -> dict[str, Any]:
    return python_server(
        "channel_servers.whatsapp",
        env={
            "NEXO_WHATSAPP_ACCESS_TOKEN": TOKEN,
            "NEXO_WHATSAPP_APP_SECRET": APP_SECRET,
            "NEXO_WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN,
            "NEXO_WHATSAPP_PHONE_NUMBER_ID": PHONE_NUMBER_ID,
            "NEXO_WHATSAPP_API_BASE_URL": fake.url,
            "NEXO_WHATSAPP_PORT": str(port),
            "NEXO_WHATSAPP_APPROVAL_NUMBERS": json.dumps([OPERATOR]),
        },
    )


def texts_to(fake: FakeWhatsApp, wa_id: str) -> list[str]:
    return [m["text"]["body"] for m in fake.messages("text") if m["to"] == wa_id]


async def wait_line(orch: Orchestrator, text: str, timeout: float = 60.0) -> int:
    return await anyio.to_thread.run_sync(lambda: orch.wait_for_line(text, timeout=timeout))


async def until(fake: FakeWhatsApp, predicate: Callable[[FakeWhatsApp], bool]) -> None:
    await fake.wait_for(predicate, timeout_s=60)


async def test_a_paired_stranger_is_answered_and_the_operator_approves_by_button(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    fake = FakeWhatsApp()
    port = free_port()
    script: list[ScriptItem] = [
        ModelReply("welcome aboard"),
        CallTool("notes__write_note", {"text": "buy milk"}),
        ModelReply("noted"),
    ]
    async with serve(fake), httpx2.AsyncClient() as http:
        with FakeLLM(script) as llm:
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=tmp_path / "state",
                llm_base_url=llm.openai_base_url,
                servers={
                    "whatsapp": whatsapp_server(fake, port),
                    "pairing": python_server("servers.pairing"),
                    "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)}),
                },
                agent={"channels": ["whatsapp"]},
                extra={
                    "channel_options": {
                        "whatsapp": {
                            "rate_per_minute": None,
                            "approval_timeout_s": 60,
                            "pairing": {"policy": "pairing", "allow_from": [OPERATOR]},
                        }
                    }
                },
            )
            webhook = f"http://127.0.0.1:{port}/webhook"
            mesh = running(config, timeout=120)
            # Entered off the event loop: the channel's start-up token check calls the stand-in here.
            orch = await anyio.to_thread.run_sync(mesh.__enter__)
            try:
                await wait_line(orch, "server whatsapp ready")
                handshake = await fake.handshake(http, webhook, VERIFY_TOKEN, challenge="77")
                assert (handshake.status_code, handshake.text) == (200, "77")

                await fake.deliver(http, webhook, fake.text(STRANGER, "hi, I'm Bob", name="Bob"), times=2)
                await until(fake, lambda f: any("nexo pair approve" in t for t in texts_to(f, STRANGER)))
                code_reply = next(t for t in texts_to(fake, STRANGER) if "nexo pair approve" in t)
                found = re.search(r"\b([A-HJ-NP-Z2-9]{4}-?[A-HJ-NP-Z2-9]{4})\b", code_reply)
                assert found is not None, code_reply
                approved = await anyio.to_thread.run_sync(
                    lambda: nexo("pair", "approve", found.group(1), "--config", str(config), "--json")
                )
                assert approved.returncode == 0, approved.stderr
                assert json.loads(approved.stdout)["record"]["sender"] == STRANGER

                await fake.deliver(http, webhook, fake.text(STRANGER, "thanks!", name="Bob"))
                await until(fake, lambda f: "welcome aboard" in texts_to(f, STRANGER))

                await fake.deliver(http, webhook, fake.text(OPERATOR, "note: buy milk", name="Op"))
                await until(fake, lambda f: bool(f.messages("interactive")))
                (prompt,) = fake.messages("interactive")
                assert prompt["to"] == OPERATOR
                allow_id = prompt["interactive"]["action"]["buttons"][0]["reply"]["id"]
                request_id = allow_id.rsplit(":", 1)[1]

                # The paired contact presses Approve (a forwarded prompt): the answer does not count.
                await fake.deliver(
                    http, webhook, fake.button_reply(STRANGER, allow_id, "Approve", name="Bob")
                )
                await wait_line(
                    orch, f"approval answer for {request_id} from '{STRANGER}' on whatsapp refused"
                )
                assert not notes.exists()

                await fake.deliver(
                    http, webhook, fake.button_reply(OPERATOR, allow_id, "Approve", name="Op"), times=2
                )
                await until(fake, lambda f: "noted" in texts_to(f, OPERATOR))
                await until(fake, lambda f: any(t.startswith("Approved by") for t in texts_to(f, OPERATOR)))
            finally:
                await anyio.to_thread.run_sync(lambda: mesh.__exit__(None, None, None))
        prompts = [request.last_user_text or "" for request in llm.requests]
    assert notes.read_text() == "buy milk\n"
    assert "hi, I'm Bob" not in "".join(prompts)
    to_stranger = texts_to(fake, STRANGER)
    assert to_stranger.index("welcome aboard") == len(to_stranger) - 2
    assert to_stranger[-1].startswith(f"[refused] your answer to approval {request_id} was not counted")
    (approved_note,) = [t for t in texts_to(fake, OPERATOR) if t.startswith("Approved by")]
    assert OPERATOR in approved_note
    assert approved_note.endswith(f"({request_id}).")


async def test_channel_doctor_shows_why_a_rejected_token_stops_the_server(tmp_path: Path) -> None:
    fake = FakeWhatsApp(token="EAAthe-real-one")
    async with serve(fake):
        with FakeLLM([]) as llm:
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=tmp_path / "state",
                llm_base_url=llm.openai_base_url,
                servers={"whatsapp": whatsapp_server(fake, free_port())},
                agent={"channels": ["whatsapp"]},
            )
            doctor = await anyio.to_thread.run_sync(
                lambda: nexo("channel", "doctor", "--config", str(config), "--json")
            )
    (result,) = json.loads(doctor.stdout)["results"]
    assert (doctor.returncode, result["server"], result["verdict"], result["kind"]) == (
        1,
        "whatsapp",
        "fail",
        "start",
    )
    for shown in (doctor.stderr, result["reason"]):
        assert "WhatsApp refused the access token or phone number id (WhatsApp error 190" in shown
        assert "set a valid NEXO_WHATSAPP_ACCESS_TOKEN" in shown
    assert result["fix"].startswith("correct servers.whatsapp (its env or command) as the message says")
    assert TOKEN not in doctor.stderr + doctor.stdout
