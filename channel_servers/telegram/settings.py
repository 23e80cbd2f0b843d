"""Settings of the Telegram channel (environment variables ``NEXO_TELEGRAM_*``)."""

from __future__ import annotations

import re
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings
from shared.channelkit.settings import describe_problems
from shared.net import is_loopback

NAME = "telegram"
TOKEN_VARIABLE = "NEXO_TELEGRAM_BOT_TOKEN"  # noqa: S105 -- the variable, not its value
_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,}")
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,256}")
_CHAT_ID = re.compile(r"-?[1-9][0-9]{0,19}")


class TelegramSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_TELEGRAM_", extra="forbid")

    bot_token: SecretStr
    """From @BotFather. In the config, pass it as ``${file:PATH}`` or ``${VAR}``; it is never logged."""
    api_base_url: str = "https://api.telegram.org"
    """The Bot API server: Telegram's, or a self-hosted ``telegram-bot-api``."""
    mode: Literal["polling", "webhook"] = "polling"
    """``polling`` needs no public URL; ``webhook`` needs ``webhook_url`` reachable by Telegram."""
    poll_timeout_s: int = Field(50, ge=0, le=100)
    """How long one ``getUpdates`` long poll waits for updates."""
    webhook_url: str | None = None
    """The public HTTPS URL Telegram posts updates to (it reaches ``webhook_host:webhook_port``)."""
    webhook_secret: SecretStr | None = None
    """Sent back by Telegram in ``X-Telegram-Bot-Api-Secret-Token``; 16-256 of ``A-Z a-z 0-9 _ -``."""
    webhook_host: str = "127.0.0.1"
    webhook_port: int = Field(8793, ge=0, le=65535)
    """Where the webhook listener binds (a reverse proxy with TLS forwards ``webhook_url`` here)."""
    edits_as_messages: bool = False
    """Treat an edited message as a new message (by default edits are ignored)."""
    approval_chat_ids: list[str] = Field(default_factory=list)
    """The operator's chats (numeric ids) where permission prompts appear with Approve / Deny buttons."""
    max_retries: int = Field(4, ge=0, le=10)
    """Attempts after a 429, a 5xx or a refused connection before a message waits in the outbox."""
    max_retry_wait_s: float = Field(30.0, ge=0, le=300)
    """The longest single wait on ``retry_after``; longer ones leave the message queued."""

    @field_validator("bot_token")
    @classmethod
    def _token_shape(cls, value: SecretStr) -> SecretStr:
        if not _TOKEN.fullmatch(value.get_secret_value()):
            raise ValueError(
                f"{TOKEN_VARIABLE} does not look like a bot token (digits, ':', then 20+ letters, "
                "digits, '_' or '-'); copy it from @BotFather's /token"
            )
        return value

    @field_validator("approval_chat_ids")
    @classmethod
    def _chat_ids(cls, value: list[str]) -> list[str]:
        for chat_id in value:
            if not _CHAT_ID.fullmatch(chat_id):
                raise ValueError(
                    f"approval chat id {chat_id!r} is not a Telegram chat id: use the numeric id "
                    "(your own user id for your private chat with the bot)"
                )
        return value

    @field_validator("api_base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"api_base_url {value!r} must start with https:// (or http:// for a local one)")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _webhook_complete(self) -> Self:
        if self.mode != "webhook":
            return self
        url = urlsplit(self.webhook_url or "")
        # Telegram posts to https only; a self-hosted Bot API server on this machine may use http.
        if not (url.scheme == "https" or (url.scheme == "http" and is_loopback(url.hostname or ""))):
            raise ValueError(
                "mode webhook needs NEXO_TELEGRAM_WEBHOOK_URL, the public https:// URL Telegram posts to"
            )
        secret = self.webhook_secret.get_secret_value() if self.webhook_secret else ""
        if not _SECRET_TOKEN.fullmatch(secret):
            raise ValueError(
                "mode webhook needs NEXO_TELEGRAM_WEBHOOK_SECRET: 16-256 characters of A-Z, a-z, 0-9, "
                "'_' and '-' (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        return self


class SettingsError(ValueError):
    """The environment does not configure the channel; one line naming the variable and the fix."""


def load_settings() -> TelegramSettings:
    """Settings from the environment, a problem reported as ``NEXO_TELEGRAM_<KEY>: what is wrong``."""
    try:
        return TelegramSettings()
    except ValidationError as exc:
        raise SettingsError(
            describe_problems(
                exc, "NEXO_TELEGRAM_", when_missing={"BOT_TOKEN": " (the token from @BotFather)"}
            )
        ) from None
