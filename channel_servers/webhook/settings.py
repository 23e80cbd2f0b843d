"""Settings of the webhook channel server (environment variables ``NEXO_WEBHOOK_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")


class WebhookSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_WEBHOOK_", extra="forbid", populate_by_name=True)

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_WEBHOOK_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    """Default: ``<state_dir>/webhook/webhook.db``."""
    host: str = "127.0.0.1"
    """Where the webhook listener binds. Off loopback is allowed: every source is verified."""
    port: int = Field(8787, ge=0, le=65535)
    """The listener's port; 0 picks a free one (``list_sources`` reports it)."""
    sources_file: Path | None = None
    """A YAML or JSON file listing the sources."""
    sources: list[Any] | None = None
    """The sources as a JSON list, instead of a file."""
    header_timeout_s: float = Field(10.0, gt=0, le=300)
    """A connection whose request headers are not complete within this is closed."""
    max_pending: int = Field(10_000, ge=1)
    """Events kept for the orchestrator before new webhooks are answered 503 (senders retry)."""

    @property
    def database(self) -> Path:
        return (self.db_path or self.state_dir / "webhook" / "webhook.db").expanduser()
