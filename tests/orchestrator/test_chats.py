"""Which chats are groups: believed when the channel says, inferred for Claude Code channels."""

from __future__ import annotations

from orchestrator.intake.chats import scope_of


def _telegram_plugin(chat: str, user: str) -> dict[str, str]:
    """The meta of the official Telegram plugin's push: no chat_type."""
    return {"chat_id": chat, "message_id": "7", "user": "ann", "user_id": user, "ts": "2026-11-26T00:00:00Z"}


def test_a_plugin_chat_whose_id_is_not_the_senders_is_a_group_and_its_own_chat_is_a_dm() -> None:
    assert scope_of(_telegram_plugin("-1001234", "42"), infer=True) == "group"
    assert scope_of(_telegram_plugin("42", "42"), infer=True) == "dm"


def test_what_the_channel_says_wins_over_the_inference() -> None:
    assert scope_of({**_telegram_plugin("-1001234", "42"), "chat_type": "private"}, infer=True) == "dm"
    assert scope_of({**_telegram_plugin("42", "42"), "chat_type": "supergroup"}, infer=True) == "group"
    assert scope_of({**_telegram_plugin("42", "42"), "is_group": "true"}, infer=True) == "group"


def test_a_nexo_channel_is_not_second_guessed_it_names_its_groups() -> None:
    assert scope_of(_telegram_plugin("-1001234", "42")) == "dm"
    assert scope_of({**_telegram_plugin("-1001234", "42"), "chat_type": "group"}) == "group"


def test_a_chat_without_a_sender_id_is_not_taken_for_a_group() -> None:
    assert scope_of({"chat_id": "-1001234"}, infer=True) == "dm"
