"""Settings of the pairing server (environment variables ``NEXO_PAIRING_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")


class PairingSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_PAIRING_", extra="forbid", populate_by_name=True)

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_PAIRING_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    """Default: ``<state_dir>/pairing/pairing.db``."""
    key_path: Path | None = None
    """Default: ``<state_dir>/pairing/code.key`` (32 random bytes, created with mode 0600)."""
    max_pending: int = Field(3, ge=1, le=1000)
    """Open pending requests per (channel, account); a new unknown sender beyond them is dropped."""
    max_replies_per_pending: int = Field(2, ge=1, le=100)
    """Challenge replies one pending sender gets; later messages get no reply."""
    new_code_interval_s: float = Field(600.0, ge=0)
    """Least time between two codes issued to the same sender."""
    code_ttl_s: float = Field(3600.0, gt=0)
    """How long a code can be approved."""
    lockout_failures: int = Field(5, ge=1, le=1000)
    """Failed approvals within ``lockout_window_s`` that lock every approval."""
    lockout_window_s: float = Field(3600.0, gt=0)
    lockout_s: float = Field(3600.0, gt=0)
    """How long approvals stay locked."""
    busy_timeout_ms: int = Field(5000, ge=0, le=600_000)
    """How long a write waits for another process's lock before the check fails closed."""

    @property
    def pairing_dir(self) -> Path:
        return (self.state_dir / "pairing").expanduser()

    @property
    def database(self) -> Path:
        return (self.db_path or self.pairing_dir / "pairing.db").expanduser()

    @property
    def key_file(self) -> Path:
        return (self.key_path or self.pairing_dir / "code.key").expanduser()
