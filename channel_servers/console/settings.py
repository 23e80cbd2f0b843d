"""Settings of the console channel server (environment variables ``NEXO_CONSOLE_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")


def socket_path_for(state_dir: Path) -> Path:
    """Where ``nexo chat`` finds the console for a state directory."""
    return state_dir.expanduser() / "console" / "console.sock"


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_CONSOLE_", extra="forbid")

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_CONSOLE_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    socket_path: Path | None = None
    max_pending: int = Field(1000, ge=1)
    """Unacknowledged inbound messages kept before the console refuses more (the chat is told)."""
    approval_ttl_s: float = Field(600.0, gt=0, le=600)

    @property
    def database(self) -> Path:
        return (self.db_path or self.state_dir / "console" / "console.db").expanduser()

    @property
    def socket(self) -> Path:
        return (self.socket_path or socket_path_for(self.state_dir)).expanduser()
