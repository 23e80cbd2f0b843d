"""Settings of the WhatsApp channel (environment variables ``NEXO_WHATSAPP_*``).

Secrets (the access token, the app secret, the verify token) come from the environment; in nexo's
config pass them as ``${file:PATH}`` or ``${VAR}`` in the server's ``env``. They are ``SecretStr``:
never shown in a repr, a log line or an error.
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings

NAME = "whatsapp"
WA_ID = re.compile(r"^[0-9]{6,20}$")


class WhatsAppSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_WHATSAPP_", extra="forbid")

    access_token: SecretStr
    """A system user's permanent token (or a temporary one) with ``whatsapp_business_messaging``."""
    app_secret: SecretStr
    """The Meta app's secret: every webhook POST is signed with it (``X-Hub-Signature-256``)."""
    verify_token: SecretStr
    """Any string you choose; Meta sends it back once when you configure the webhook URL."""
    phone_number_id: str = Field(pattern=r"^[0-9]{1,32}$")
    """The business phone number's id (WhatsApp > API Setup), not the phone number itself."""
    api_base_url: str = "https://graph.facebook.com"
    api_version: str = Field("v21.0", pattern=r"^v[0-9]+\.[0-9]+$")
    """The Graph API version every call is pinned to."""
    host: str = "127.0.0.1"
    port: int = Field(8792, ge=0, le=65535)
    """Where the webhook listens (``/webhook``). Meta needs a public HTTPS URL: put your tunnel or
    reverse proxy in front of it."""
    media_max_bytes: int = Field(16 * 1024 * 1024, ge=1)
    """Inbound media larger than this is not downloaded (the message says so)."""
    notice_template: str | None = Field(None, pattern=r"^[a-z0-9_]{1,512}$")
    """An approved template with one body parameter, used for messages outside the 24-hour window."""
    notice_template_language: str = Field("en_US", pattern=r"^[a-z]{2,3}(_[A-Z]{2})?$")
    approval_numbers: list[str] = Field(default_factory=list)
    """wa_ids (digits, country code first) shown approval buttons; empty: prompts go to nobody here."""
    request_timeout_s: float = Field(30.0, gt=0, le=300)
    max_retries: int = Field(3, ge=0, le=10)
    """Retries of a rate-limited or failed (5xx, network) call before the message stays queued."""
    max_backoff_s: float = Field(30.0, gt=0, le=600)

    @field_validator("approval_numbers")
    @classmethod
    def _digits(cls, numbers: list[str]) -> list[str]:
        for number in numbers:
            if not WA_ID.fullmatch(number):
                raise ValueError(
                    f"approval number {number!r} is not a wa_id: write the number with its country code, "
                    "digits only (e.g. 15551234567)"
                )
        return numbers

    @property
    def graph_url(self) -> str:
        return f"{self.api_base_url.rstrip('/')}/{self.api_version}"


class SettingsProblem(ValueError):
    """The environment does not configure the channel; the message names each variable to set."""


def load_settings() -> WhatsAppSettings:
    """The settings from the environment, or one error naming every ``NEXO_WHATSAPP_*`` to fix."""
    try:
        return WhatsAppSettings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            variable = f"NEXO_WHATSAPP_{field.upper()}"
            if error["type"] == "missing":
                problems.append(f"{variable} is not set")
            else:
                problems.append(f"{variable}: {error['msg']}")
        raise SettingsProblem(
            f"the WhatsApp channel is not configured: {'; '.join(problems)} "
            "(see docs/channels/whatsapp.md#settings)"
        ) from None
