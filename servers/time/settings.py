"""Settings of the time server (environment variables ``NEXO_TIME_*``)."""

from __future__ import annotations

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from servers.time.zones import zone


class TimeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_TIME_", extra="forbid")

    default_timezone: str = "UTC"
    """The operator's time zone, used when a tool call names none (an IANA name like Europe/Madrid)."""

    @field_validator("default_timezone")
    @classmethod
    def _known(cls, value: str) -> str:
        zone(value)
        return value
