"""Settings of the sample channel (environment variables ``NEXO_SAMPLE_*``)."""

from __future__ import annotations

import secrets
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from shared.channelkit import ChannelSettings
from shared.net import is_loopback
from shared.private import create_private_file

NAME = "sample"


class SampleSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_SAMPLE_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8790, ge=0, le=65535)
    """0 picks a free port (the URL printed on start says which)."""
    token: SecretStr | None = None
    """Whoever holds it chats as the operator. Default: generated once into ``<state_dir>/sample/token``."""

    @field_validator("host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        # Plain HTTP with the token in the URL: never on a network others can listen to.
        if not is_loopback(value):
            raise ValueError(
                f"the sample channel serves plain HTTP on loopback only, not {value!r}; use 127.0.0.1 "
                "or ::1, and put a reverse proxy with TLS in front to reach it from elsewhere"
            )
        return value

    @property
    def token_path(self) -> Path:
        return self.channel_dir(NAME) / "token"

    def resolve_token(self) -> str:
        """The configured token, else the one kept in the state dir, else a new one written 0600."""
        if self.token is not None:
            return self.token.get_secret_value()
        path = self.token_path
        if path.exists():
            return path.read_text().strip()
        # Two processes starting at once agree on one token: the first complete file wins.
        create_private_file(path, (secrets.token_urlsafe(24) + "\n").encode())
        return path.read_text().strip()
