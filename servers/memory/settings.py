"""Settings of the memory server (environment variables ``NEXO_MEMORY_*``).

Nested groups use ``__``: ``NEXO_MEMORY_EMBEDDING__PROVIDER=openai_compat``,
``NEXO_MEMORY_CONSOLIDATION__WORKING_SET_MAX=2000``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from servers.memory.consolidate import Policy
from servers.memory.embeddings import EmbeddingSettings
from shared.protocol.memory.meta import AGENT_PATTERN

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
DAY_S = 86_400.0


class ConsolidationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    every_assistant_turns: int = Field(20, ge=0)
    """Run a pass after this many assistant turns were appended to an agent's transcripts (0: never)."""
    half_life_days: float = Field(30.0, gt=0)
    recency_half_life_days: float = Field(7.0, gt=0)
    promote_threshold: float = Field(1.0, ge=0)
    promote_max: int = Field(5, ge=0)
    """Memories promoted to MEMORY.md per pass at most."""
    working_set_max: int = Field(5_000, ge=1)
    """Memories per agent in the working set (scored for promotion to MEMORY.md); the coldest beyond
    this are archived: never deleted, and still found by recall."""

    def policy(self) -> Policy:
        return Policy(
            half_life_days=self.half_life_days,
            recency_half_life_days=self.recency_half_life_days,
            promote_threshold=self.promote_threshold,
            promote_max=self.promote_max,
            working_set_max=self.working_set_max,
        )


class MemorySettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="NEXO_MEMORY_", env_nested_delimiter="__", extra="forbid", validate_by_name=True
    )

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_MEMORY_STATE_DIR", "NEXO_STATE_DIR")
    )
    db_path: Path | None = None
    """Default ``<state_dir>/memory/memory.db``."""
    default_agent: str = Field("nexo", pattern=AGENT_PATTERN)
    """The agent of tool calls that carry no ``nexo/agent`` in ``_meta`` (any other MCP client)."""
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    guard_mode: Literal["block", "redact", "warn"] = "block"
    """What a secret in remembered content, a MEMORY.md edit or a transcript entry does."""
    guard_disabled_rules: list[str] = Field(default_factory=list)
    max_content_bytes: int = Field(8 * 1024, ge=64, le=1024 * 1024)
    """Largest memory or transcript entry, in UTF-8 bytes."""
    transcript_max_entries: int = Field(500, ge=1)
    """Entries kept per session; the oldest are trimmed."""
    session_idle_gc_days: float = Field(30.0, gt=0)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    access_flush_s: float = Field(5.0, gt=0, le=3600)
    """Recalls note access counts in memory; they are written every this many seconds and at
    shutdown (a crash loses at most this window of them)."""
    memory_md_budget_bytes: int = Field(16 * 1024, ge=256)
    """Largest MEMORY.md per agent; edits that would pass it are refused."""
    allow_model_mismatch: bool = False
    """Start even when the database was indexed by another embedding model, for ``nexo memory
    reindex``: until the reindex finishes, recall is keyword-only and new memories are refused."""

    @property
    def memory_dir(self) -> Path:
        return self.state_dir.expanduser() / "memory"

    @property
    def database(self) -> Path:
        return (self.db_path or self.memory_dir / "memory.db").expanduser()

    @property
    def agents_dir(self) -> Path:
        return self.memory_dir / "agents"

    @property
    def session_idle_gc_s(self) -> float:
        return self.session_idle_gc_days * DAY_S
