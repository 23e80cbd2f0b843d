"""Which mail the email channel passes on, decided from its headers alone (no server needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from channel_servers.email.authentication import authenticated
from channel_servers.email.mail import body_text, html_to_text, not_for_an_answer, parse
from channel_servers.email.settings import EmailSettings
from channel_servers.email.smtp import compose, reply_message_id, reply_subject
from channel_servers.email.store import Parent

TRUSTED = "mx.agent.test"


def raw(*headers: str, body: str = "hello") -> bytes:
    return ("\r\n".join(headers) + "\r\n\r\n" + body + "\r\n").encode()


def passes(*headers: str) -> bool:
    return authenticated(parse(raw(*headers)).message, TRUSTED)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            ("From: a@example.org", f"Authentication-Results: {TRUSTED}; dmarc=pass header.from=example.org"),
            True,
        ),
        (
            (
                "From: a@mail.example.org",
                f"Authentication-Results: {TRUSTED}; dkim=pass header.d=example.org",
            ),
            True,
        ),
        (
            (
                "From: a@example.org",
                f"Authentication-Results: {TRUSTED} 1; dkim=pass (good) header.i=@example.org",
            ),
            True,
        ),
        (("From: a@example.org", f"Authentication-Results: {TRUSTED}; dkim=pass header.d=evil.test"), False),
        (
            ("From: a@example.org", f"Authentication-Results: {TRUSTED}; dmarc=pass header.from=evil.test"),
            False,
        ),
        (
            ("From: a@example.org", f"Authentication-Results: {TRUSTED}; dmarc=fail header.from=example.org"),
            False,
        ),
        (
            (
                "From: a@example.org",
                "Authentication-Results: mx.evil.test; dmarc=pass header.from=example.org",
            ),
            False,
        ),
        (
            (
                "From: a@example.org",
                f"Authentication-Results: {TRUSTED}; dmarc=fail header.from=example.org",
                f"Authentication-Results: {TRUSTED}; dmarc=pass header.from=example.org",
            ),
            False,
        ),
        (("From: a@example.org, b@example.org", f"Authentication-Results: {TRUSTED}; dmarc=pass"), False),
        (("From: a@example.org",), False),
    ],
)
def test_only_the_receiving_servers_topmost_verdict_counts(headers: tuple[str, ...], expected: bool) -> None:
    assert passes(*headers) is expected


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Auto-Submitted: auto-replied", "Auto-Submitted: auto-replied"),
        ("Auto-Submitted: auto-generated; type=vacation", "Auto-Submitted: auto-generated"),
        ("Precedence: bulk", "Precedence: bulk"),
        ("Precedence: list", "Precedence: list"),
        ("List-Id: <dev.lists.example.org>", "mailing list (List-Id)"),
        ("Return-Path: <>", "a bounce (empty Return-Path)"),
        ("X-Autoreply: yes", "an auto-reply"),
    ],
)
def test_automatic_mail_is_never_answered(header: str, reason: str) -> None:
    mail = parse(raw("From: ana@example.org", "Message-ID: <m@example.org>", header))
    assert not_for_an_answer(mail, "agent@example.org") == reason


def test_mail_from_a_person_may_be_answered_and_our_own_never() -> None:
    person = parse(raw("From: Ana <ana@example.org>", "Auto-Submitted: no", "Return-Path: <ana@example.org>"))
    own = parse(raw("From: agent@example.org"))
    daemon = parse(raw("From: MAILER-DAEMON@example.org"))
    assert not_for_an_answer(person, "agent@example.org") is None
    assert not_for_an_answer(own, "agent@example.org") == "from agent@example.org"
    assert not_for_an_answer(daemon, "agent@example.org") == "from mailer-daemon@example.org"


def test_html_mail_becomes_clean_text() -> None:
    html = (
        "<html><head><style>p{color:red}</style><title>x</title></head><body>"
        "<p>Hello&nbsp;<b>Ana</b>,</p><script>alert(1)</script>"
        '<ul><li>one</li><li>two <a href="https://example.org/x">link</a></li></ul>'
        '<p><a href="javascript:evil()">click</a></p></body></html>'
    )
    assert html_to_text(html) == "Hello Ana,\n\n- one\n- two link (https://example.org/x)\n\nclick"


def test_an_html_only_mail_reaches_the_model_as_text() -> None:
    mail = parse(
        raw(
            "From: a@example.org",
            "MIME-Version: 1.0",
            "Content-Type: text/html; charset=utf-8",
            body="<p>Hi</p>",
        )
    )
    assert body_text(mail) == "Hi"


def test_the_thread_is_the_first_reference_else_in_reply_to_else_the_mail() -> None:
    assert parse(raw("Message-ID: <c@x>", "References: <a@x> <b@x>", "In-Reply-To: <b@x>")).thread == "a@x"
    assert parse(raw("Message-ID: <c@x>", "In-Reply-To: <b@x>")).thread == "b@x"
    assert parse(raw("Message-ID: <c@x>")).thread == "c@x"


def test_a_reply_is_threaded_plain_text_and_quotes_nothing(tmp_path: Path) -> None:
    settings = EmailSettings(
        state_dir=tmp_path,
        address="agent@example.org",
        password="pw",
        imap_host="imap.example.org",
        smtp_host="smtp.example.org",
        authentication="off",
    )
    parent = Parent("b@x", "ana@example.org", "RE: plans", ("a@x",))
    message_id = reply_message_id("reply:email:message-id:b@x", "example.org")
    reply = compose(settings, parent, "Sure, **see** [here](https://example.org).", message_id)
    assert (reply["To"], reply["Subject"], reply["In-Reply-To"], reply["References"]) == (
        "ana@example.org",
        "RE: plans",
        "<b@x>",
        "<a@x> <b@x>",
    )
    # One Message-ID per idempotency key, for every attempt: the Sent folder can be asked for it.
    assert reply["Message-ID"] == f"<{message_id}>"
    assert message_id == reply_message_id("reply:email:message-id:b@x", "example.org")
    assert message_id != reply_message_id("reply:email:message-id:c@x", "example.org")
    assert message_id.endswith("@example.org")
    assert reply.get_content() == "Sure, see here (https://example.org).\n"
    assert reply_subject("Lunch") == "Re: Lunch"
    assert reply_subject("") == "Re: (no subject)"


def test_settings_fail_closed_with_the_variable_to_set(tmp_path: Path) -> None:
    def settings(**changes: Any) -> EmailSettings:
        values: dict[str, Any] = {
            "state_dir": tmp_path,
            "address": "agent@example.org",
            "password": "pw",
            "imap_host": "imap.example.org",
            "smtp_host": "smtp.example.org",
        }
        return EmailSettings.model_validate({**values, **changes})

    with pytest.raises(ValidationError, match="NEXO_EMAIL_TRUSTED_AUTHSERV_ID is not set"):
        settings()
    with pytest.raises(ValidationError, match="NEXO_EMAIL_IMAP_SECURITY to tls or starttls"):
        settings(authentication="off", imap_security="none")
    with pytest.raises(ValidationError, match="NEXO_EMAIL_ALLOW_PLAINTEXT_PASSWORD=true"):
        settings(authentication="off", smtp_security="none")
    allowed = settings(authentication="off", imap_security="none", allow_plaintext_password=True)
    assert (allowed.imap_security, allowed.imap_host) == ("none", "imap.example.org")
    assert settings(authentication="off", imap_security="starttls").imap_port == 143
    assert settings(authentication="off", imap_security="starttls", imap_port=1143).imap_port == 1143
    assert settings(authentication="off").imap_port == 993
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    with pytest.raises(ValidationError, match="is not a readable PEM file of certificates"):
        settings(authentication="off", ca_file=str(not_pem))
    with pytest.raises(ValidationError, match="is not a readable PEM file of certificates"):
        settings(authentication="off", ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(ValidationError, match="is not an email address"):
        settings(address="agent", authentication="off")
    assert settings(trusted_authserv_id="mx.example.org").login == "agent@example.org"
