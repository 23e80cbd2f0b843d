"""Settings of the audit server (environment variables ``NEXO_AUDIT_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")


class AuditSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_AUDIT_", extra="forbid", populate_by_name=True)

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_AUDIT_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    """Default: ``<state_dir>/audit/audit.db``."""
    turns_per_goal: int = Field(1000, ge=1)
    """Turns kept per goal; older turns of that goal (and their tool calls and approvals) are trimmed."""
    max_age_days: float | None = Field(None, gt=0)
    """Entries older than this are trimmed; unset keeps them until the per-goal cap removes them."""
    trim_interval_s: float = Field(3600.0, ge=0)
    """How often retention runs while the server is up (also once at start); 0 runs it only on request."""
    max_concurrent_goals: int = Field(4, ge=1, le=1000)
    """Goals running at once; more are queued and start, oldest first, when one stops running."""
    commit_batch_max: int = Field(256, ge=1, le=5000)
    """Most entries committed in one transaction by the group-commit writer."""
    commit_window_ms: float = Field(0.0, ge=0, le=100)
    """Extra wait for more appends before a commit. 0: commit what queued while the last fsync ran."""
    queue_max: int = Field(10_000, ge=1)
    """Appends waiting for the writer before new ones wait for room (back-pressure)."""

    @property
    def database(self) -> Path:
        return (self.db_path or self.state_dir / "audit" / "audit.db").expanduser()

    @property
    def max_age_s(self) -> float | None:
        return None if self.max_age_days is None else self.max_age_days * 86400
