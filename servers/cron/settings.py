"""Settings of the cron server (environment variables ``NEXO_CRON_*``).

The jitter knobs nest: ``NEXO_CRON_JITTER__ENABLED=false``, ``NEXO_CRON_JITTER__RECURRING_FRAC=0.1``.
They are the defaults; ``nexo/cron/configure`` overrides them at run time (kept in the database).
"""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from servers.cron.jitter import JitterKnobs
from shared.events import DEFAULT_MAX_PENDING

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")


class CronSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="NEXO_CRON_", env_nested_delimiter="__", extra="forbid", populate_by_name=True
    )

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_CRON_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    """Default: ``<state_dir>/cron/cron.db``."""
    default_timezone: str = "UTC"
    """Timezone of schedules created without one (``once_at 09:00`` means 09:00 here)."""
    max_entries_per_binding: int = Field(50, ge=1, le=100_000)
    """Unfinished entries one binding may hold (config-owned pollers do not count)."""
    misfire_tolerance_s: float = Field(60.0, ge=0)
    """A slot later than this when it comes due is missed and handled by the entry's misfire policy."""
    default_grace_s: float = Field(86_400.0, ge=0)
    """With misfire ``all``, missed slots younger than this still fire."""
    max_missed_rows: int = Field(1_000, ge=1, le=100_000)
    """Missed slots recorded as rows per entry and sweep; the missed event counts them all."""
    max_sleep_s: float = Field(300.0, gt=0)
    """Longest sleep between two looks at the clock, so a wall-clock step is noticed."""
    retry_base_s: float = Field(30.0, gt=0)
    """A failed one-shot fire is retried after this, doubling each time."""
    retry_cap_s: float = Field(1_800.0, gt=0)
    retry_max_attempts: int = Field(3, ge=1, le=20)
    """Attempts in all (the first included) before a one-shot is marked failed."""
    overlap_timeout_s: float = Field(3_600.0, gt=0)
    """A fire with no reported outcome stops blocking the entry's next slots after this long."""
    purge_after_s: float = Field(86_400.0, ge=0)
    """Finished one-shots (done) and their fires are deleted this long after they finished."""
    history_s: float = Field(7 * 86_400.0, ge=0)
    """Ended fire rows (each entry keeps its newest), failed and expired entries, and acknowledged
    events are deleted after this long."""
    max_pending_events: int = Field(DEFAULT_MAX_PENDING, ge=1)
    """Unacknowledged events the log holds; past it, fires wait in the database until there is room."""
    jitter: JitterKnobs = Field(default_factory=JitterKnobs)

    @field_validator("default_timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown timezone {value!r}; set NEXO_CRON_DEFAULT_TIMEZONE to an IANA name such as "
                "'Europe/Madrid' or 'UTC'"
            ) from exc
        return value

    @property
    def database(self) -> Path:
        return (self.db_path or self.state_dir / "cron" / "cron.db").expanduser()
