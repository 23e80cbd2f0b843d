"""Meta's webhook into the WhatsApp channel: handshake, signatures, stored-once messages, statuses."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.channel_servers.whatsapp.conftest import CONTACT, VERIFY_TOKEN, running
from tests.fakes.whatsapp_api import APP_SECRET, TOKEN, FakeWhatsApp, signature

pytestmark = pytest.mark.anyio


async def test_the_handshake_echoes_the_challenge_only_for_the_verify_token(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        right = await FakeWhatsApp.handshake(wa.http, wa.webhook, VERIFY_TOKEN, challenge="4711")
        wrong = await FakeWhatsApp.handshake(wa.http, wa.webhook, VERIFY_TOKEN + "x", challenge="4711")
        no_mode = await wa.http.get(
            wa.webhook, params={"hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"}
        )
    assert (right.status_code, right.text) == (200, "4711")
    assert (wrong.status_code, wrong.text) == (403, "verify token mismatch")
    assert no_mode.status_code == 400


async def test_a_text_message_is_stored_once_with_the_wa_id_as_sender(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        payload = wa.fake.text(CONTACT, "hello there", name="Ana (not an id)", message_id="wamid.AAA1")
        statuses = await wa.deliver(payload, times=3)
        events = await wa.pull()
    assert statuses == [200, 200, 200]
    assert [(e.kind, e.dedupe_key, e.payload) for e in events] == [
        (
            "message",
            "wamid.AAA1",
            {
                "content": "hello there",
                "meta": {
                    "chat_id": CONTACT,
                    "message_id": "wamid.AAA1",
                    "user_id": CONTACT,
                    "chat_type": "private",
                    "ts": str(int(wa.clock.now)),
                    "user": "Ana (not an id)",
                },
            },
        )
    ]


async def test_a_new_message_is_marked_read_with_a_typing_indicator(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.deliver(wa.fake.text(CONTACT, "hi", message_id="wamid.T1"), times=2)
        await wa.fake.wait_for(lambda fake: any("status" in m for m in fake.sent))
    assert [m for m in wa.fake.sent if "status" in m] == [
        {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": "wamid.T1",
            "typing_indicator": {"type": "text"},
        }
    ]


async def test_unsigned_or_wrongly_signed_posts_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        body, headers = wa.fake.signed(wa.fake.text(CONTACT, "forged"))
        unsigned = await wa.http.post(wa.webhook, content=body)
        wrong_secret = await wa.http.post(
            wa.webhook, content=body, headers={"x-hub-signature-256": signature(body, APP_SECRET + "x")}
        )
        flipped = await wa.http.post(wa.webhook, content=body.replace(b"forged", b"Forged"), headers=headers)
        events = await wa.pull()
    assert [(r.status_code, r.text) for r in (unsigned, wrong_secret, flipped)] == [
        (401, "missing header x-hub-signature-256"),
        (401, "signature mismatch"),
        (401, "signature mismatch"),
    ]
    assert events == []


async def test_a_signed_payload_of_the_wrong_shape_is_a_400(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        statuses = []
        for body in (
            b"{not json",
            b'{"object": "page", "entry": []}',
            b'{"object": "whatsapp_business_account", "entry": [1]}',
        ):
            response = await wa.http.post(
                wa.webhook, content=body, headers={"x-hub-signature-256": signature(body)}
            )
            statuses.append(response.status_code)
        events = await wa.pull()
    assert statuses == [400, 400, 400]
    assert events == []


async def test_reactions_and_unsupported_types_are_logged_and_not_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(tmp_path) as wa:
        reaction = {"type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": "👍"}}
        unsupported = {"type": "unsupported", "errors": [{"code": 131051, "title": "Unsupported"}]}
        with caplog.at_level(logging.INFO, logger="nexo.whatsapp"):
            statuses = [
                *(await wa.deliver(wa.fake.message(CONTACT, reaction, message_id="wamid.R1"))),
                *(await wa.deliver(wa.fake.message(CONTACT, unsupported, message_id="wamid.U1"))),
            ]
        events = await wa.pull()
    assert statuses == [200, 200]
    assert events == []
    assert [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()] == [
        f"ignored a reaction message wamid.R1 from {CONTACT}: not a kind the channel relays",
        f"ignored a unsupported message wamid.U1 from {CONTACT}: not a kind the channel relays",
    ]


async def test_a_failed_status_marks_the_sent_message_failed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        sent = await wa.send("on its way", idempotency_key="r1")
        platform_id = sent.structured_content["platform_message_id"]
        with caplog.at_level(logging.WARNING, logger="nexo.whatsapp"):
            await wa.deliver(wa.fake.status(platform_id, "sent", CONTACT))
            await wa.deliver(wa.fake.status(platform_id, "failed", CONTACT, error_code=131026), times=3)
        again = await wa.send("on its way", idempotency_key="r1")
    assert again.structured_content["state"] == "failed"
    assert [r.getMessage() for r in caplog.records if "failed" in r.getMessage()] == [
        f"message {platform_id} to {CONTACT} failed: 131026 (#131026) Message undeliverable"
    ]


async def test_secrets_never_reach_the_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running(tmp_path) as wa:
        with caplog.at_level(logging.DEBUG, logger="nexo"):
            # Meta's side puts the verify token in the URL it requests; the channel never logs it.
            await FakeWhatsApp.handshake(wa.http, wa.webhook, VERIFY_TOKEN)
            await FakeWhatsApp.handshake(wa.http, wa.webhook, "not-" + VERIFY_TOKEN)
        with caplog.at_level(logging.DEBUG):
            await wa.contact_writes()
            await wa.send("hello")
            await wa.send("refused", chat_id="15559990000")
        shown = repr(wa.whatsapp.settings)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "webhook verified by Meta" in logged
    for secret in (TOKEN, APP_SECRET, VERIFY_TOKEN):
        assert secret not in logged
        assert secret not in shown
