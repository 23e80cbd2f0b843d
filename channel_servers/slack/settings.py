"""Settings of the Slack channel (environment variables ``NEXO_SLACK_*``)."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings
from shared.channelkit.settings import describe_problems

NAME = "slack"
BOT_TOKEN_VARIABLE = "NEXO_SLACK_BOT_TOKEN"  # noqa: S105 -- the variable, not its value
APP_TOKEN_VARIABLE = "NEXO_SLACK_APP_TOKEN"  # noqa: S105


class SlackSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_SLACK_", extra="forbid")

    bot_token: SecretStr
    """The Bot User OAuth Token (``xoxb-``); in the config ``${file:PATH}`` or ``${VAR}``. Never logged."""
    app_token: SecretStr | None = None
    """The app-level token (``xapp-``, scope ``connections:write``) that opens Socket Mode connections."""
    mode: Literal["socket", "events"] = "socket"
    """``socket``: Slack's Socket Mode, no public URL needed; ``events``: the Events API over HTTP."""
    signing_secret: SecretStr | None = None
    """Mode ``events``: the app's Signing Secret (Basic Information), which signs every request."""
    events_host: str = "127.0.0.1"
    events_port: int = Field(8794, ge=0, le=65535)
    """Mode ``events``: where ``POST /slack/events`` listens (a reverse proxy with TLS forwards the
    app's Request URL here)."""
    api_base_url: str = "https://slack.com/api"
    """The Web API; GovSlack uses ``https://slack-gov.com/api``."""
    edits: Literal["ignore", "as_message"] = "ignore"
    """An edited message is ignored, or answered as a new message. Deleted messages are always ignored."""
    approval_channel_ids: list[str] = Field(default_factory=list)
    """Where permission prompts appear with Approve / Deny buttons: the operator's DM channel with the
    app (``D...``) or a private channel (``C...``/``G...``)."""
    max_retries: int = Field(4, ge=0, le=10)
    """Attempts after a 429 or a refused connection before a message waits in the outbox."""
    max_retry_wait_s: float = Field(60.0, ge=0, le=600)
    """The longest single wait on ``Retry-After``; a longer one leaves the message queued."""

    @field_validator("bot_token")
    @classmethod
    def _bot_token_shape(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith("xoxb-"):
            raise ValueError(
                "is not a bot token (it starts with xoxb-): copy the Bot User OAuth Token from your "
                "app's OAuth & Permissions page"
            )
        return value

    @field_validator("approval_channel_ids")
    @classmethod
    def _channel_ids(cls, value: list[str]) -> list[str]:
        for channel_id in value:
            if not re.fullmatch(r"[CDG][A-Z0-9]{2,}", channel_id):
                raise ValueError(
                    f"{channel_id!r} is not a Slack channel id: open the DM with the app, then "
                    "View conversation details and copy the Channel ID (D...)"
                )
        return value

    @field_validator("api_base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"{value!r} must start with https:// (or http:// for a local one)")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _mode_complete(self) -> Self:
        if self.mode == "events":
            if not (self.signing_secret and self.signing_secret.get_secret_value()):
                raise ValueError(
                    "mode events needs NEXO_SLACK_SIGNING_SECRET: the Signing Secret from your app's "
                    "Basic Information page"
                )
            return self
        token = self.app_token.get_secret_value() if self.app_token else ""
        if not token.startswith("xapp-"):
            raise ValueError(
                f"mode socket needs {APP_TOKEN_VARIABLE}, an app-level token (xapp-) with the scope "
                "connections:write: create it under Basic Information > App-Level Tokens"
            )
        return self


class SettingsError(ValueError):
    """The environment does not configure the channel; one line naming the variable and the fix."""


def load_settings() -> SlackSettings:
    """Settings from the environment, a problem reported as ``NEXO_SLACK_<KEY>: what is wrong``."""
    try:
        return SlackSettings()
    except ValidationError as exc:
        raise SettingsError(describe_problems(exc, "NEXO_SLACK_")) from None
