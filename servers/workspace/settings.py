"""Settings of the workspace server (environment variables ``NEXO_WORKSPACE_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
KIB = 1024
MIB = 1024 * KIB

SandboxMode = Literal["auto", "bwrap", "none"]


class WorkspaceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_WORKSPACE_", extra="forbid", populate_by_name=True)

    state_dir: Path = Field(
        DEFAULT_STATE_DIR, validation_alias=AliasChoices("NEXO_WORKSPACE_STATE_DIR", "NEXO_STATE_DIR")
    )
    root: Path | None = None
    """The directory every tool is confined to. Default: ``<state_dir>/workspace`` (created 0700)."""
    sandbox: SandboxMode = "auto"
    """auto (and its synonym bwrap): shell commands run under bubblewrap, and the shell tool is not
    offered when bubblewrap does not work here; none: commands run unconfined (an explicit choice)."""
    bwrap: str = "bwrap"
    """The bubblewrap program: a name looked up on PATH or an absolute path."""
    max_read_bytes: int = Field(256 * KIB, ge=1, le=64 * MIB)
    """Most bytes of text one read_file returns; grep skips larger files."""
    max_write_bytes: int = Field(MIB, ge=1, le=256 * MIB)
    """Largest file write_file writes and edit_file edits."""
    max_output_bytes: int = Field(64 * KIB, ge=1, le=64 * MIB)
    """Most bytes of stdout, and of stderr, kept from one shell command (the head is kept)."""
    shell_timeout_max_s: float = Field(600.0, gt=0, le=86_400)
    """Longest timeout_s a shell call may ask for."""
    max_results: int = Field(1000, ge=1, le=100_000)
    """Most paths one glob or list_dir returns."""
    max_matches: int = Field(500, ge=1, le=100_000)
    """Most matching lines one grep returns."""
    max_scan_entries: int = Field(200_000, ge=1)
    """Most directory entries one glob or grep visits before it stops and says the result is partial."""

    @field_validator("bwrap")
    @classmethod
    def _program(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("NEXO_WORKSPACE_BWRAP must name the bubblewrap program, e.g. 'bwrap'")
        return value

    @property
    def workspace(self) -> Path:
        """The configured root, before symlinks are resolved."""
        return (self.root or self.state_dir / "workspace").expanduser().absolute()
