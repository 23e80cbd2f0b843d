"""The outbound secret guard: secrets leave only for the operator's own conversations."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.secret_guard import OutboundGuard, SecretWithheld
from orchestrator.mesh import CatalogTool

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SAID = f"Sure: the owner's PIN: 4711, the wifi password is Tr0ub4dor3x and the token {TOKEN}."


def _guard(**secret_guard: Any) -> OutboundGuard:
    return OutboundGuard(
        NexoConfig.model_validate(
            {
                "agents": [{"id": "nexo", "model": {"provider": "fake"}}],
                "operator": {"channel": "console", "chat_id": "operator"},
                "secret_guard": secret_guard,
            }
        )
    )


def test_a_reply_to_a_contact_is_redacted_by_default() -> None:
    sent = _guard().screen(SAID, server="telegram", chat_id="555")
    assert sent == (
        "Sure: the owner's PIN: [REDACTED:pin-phrase], the wifi password is [REDACTED:password-phrase] "
        "and the token [REDACTED:github-pat]."
    )


def test_the_operators_own_conversations_receive_the_text_unchanged() -> None:
    guard = _guard(outbound="block")
    assert guard.screen(SAID, server="console", chat_id="operator") == SAID
    assert guard.screen(SAID, server="telegram", chat_id="555", to_owner=True) == SAID
    assert guard.reply("hello there", server="telegram", chat_id="555", to_owner=False) == "hello there"


def test_block_mode_refuses_a_send_and_replaces_a_reply_without_quoting_the_secret() -> None:
    guard = _guard(outbound="block")
    with pytest.raises(SecretWithheld) as withheld:
        guard.screen(SAID, server="console", chat_id="someone-else")
    assert str(withheld.value) == (
        "refused to send this text to console:someone-else: it contains what looks like a secret "
        "(pin-phrase, password-phrase, github-pat). Send it without the secret; only the operator's own "
        "chat receives secrets (secret_guard.outbound in the config, docs/secret-guard.md)"
    )
    assert guard.reply(SAID, server="telegram", chat_id="555", to_owner=False) == (
        "[nexo] I held back my answer: it contained what looks like a secret "
        "(pin-phrase, password-phrase, github-pat)."
    )


def test_disabled_rules_are_skipped_and_unknown_ones_are_a_config_error() -> None:
    assert _guard(disabled_rules=["pin-phrase"]).screen("PIN: 4711", server="t", chat_id="1") == "PIN: 4711"
    with pytest.raises(ValidationError, match="unknown secret guard rule id\\(s\\) 'pin'; use ids from"):
        _guard(disabled_rules=["pin"])


SEND = CatalogTool(
    "slack", "post", "slack__post", "", {}, read_only=False, destructive=False, classification="outbound"
)
NOTE = CatalogTool(
    "notes", "write", "notes__write", "", {}, read_only=False, destructive=False, classification="write"
)


def test_a_servers_outbound_tool_has_every_string_argument_screened() -> None:
    guard = _guard()
    arguments = {"chat_id": "C1", "text": SAID, "blocks": [{"text": "PIN: 4711"}], "silent": True}
    assert guard.arguments(SEND, arguments) == {
        "chat_id": "C1",
        "text": guard.screen(SAID, server="slack", chat_id="C1"),
        "blocks": [{"text": "PIN: [REDACTED:pin-phrase]"}],
        "silent": True,
    }
    assert guard.arguments(NOTE, {"text": SAID}) == {"text": SAID}
    with pytest.raises(SecretWithheld):
        _guard(outbound="block").arguments(SEND, arguments)


def test_an_outbound_call_to_the_operators_own_chat_passes_unchanged() -> None:
    operator_send = CatalogTool(
        "console",
        "reply",
        "console__reply",
        "",
        {},
        read_only=False,
        destructive=False,
        classification="outbound",
    )
    arguments = {"chat_id": "operator", "text": SAID}
    assert _guard(outbound="block").arguments(operator_send, arguments) == arguments
