"""Settings of the Chirp channel: environment variables ``NEXO_CHIRP_*``."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings


class ChirpSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_CHIRP_", extra="forbid")

    api_url: str
    """Chirp's API, e.g. https://chirp.example/api."""
    secret: SecretStr
    """Shared with Chirp, which sends it with every webhook call."""
    host: str = "127.0.0.1"
    port: int = Field(8791, ge=0, le=65535)
    """Where Chirp's webhook calls arrive: POST http://HOST:PORT/chirp."""
