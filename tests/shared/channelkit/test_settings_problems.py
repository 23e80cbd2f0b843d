"""A channel that cannot start names each bad variable and what is wrong with it, on one line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings
from shared.channelkit.settings import describe_problems


class KitSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_KITTEST_")

    bot_token: str
    chat_ids: list[str]

    @field_validator("chat_ids")
    @classmethod
    def _numeric(cls, value: list[str]) -> list[str]:
        for chat_id in value:
            if not chat_id.isdigit():
                raise ValueError(f"{chat_id!r} is not a chat id: use the numeric id")
        return value


def problems(monkeypatch: pytest.MonkeyPatch, **hints: str) -> str:
    monkeypatch.setenv("NEXO_KITTEST_CHAT_IDS", '["general"]')
    with pytest.raises(ValidationError) as raised:
        KitSettings()
    return describe_problems(raised.value, "NEXO_KITTEST_", when_missing=hints)


def test_each_problem_names_its_variable_and_a_missing_one_says_it_is_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert problems(monkeypatch) == (
        "NEXO_KITTEST_BOT_TOKEN: is not set; "
        "NEXO_KITTEST_CHAT_IDS: 'general' is not a chat id: use the numeric id"
    )


def test_a_missing_variable_can_say_where_its_value_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    assert problems(monkeypatch, BOT_TOKEN=" (from the platform's console)").startswith(
        "NEXO_KITTEST_BOT_TOKEN: is not set (from the platform's console); "
    )
