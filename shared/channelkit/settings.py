"""What every channel reads: its state, its database, and the agent's workspace it shares files in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
MIB: Final = 1024 * 1024
SHARED_VARIABLES: Final = {"state_dir": "NEXO_STATE_DIR", "workspace_dir": "NEXO_WORKSPACE_ROOT"}
"""Variables the orchestrator passes every child, read below the channel's own ``NEXO_<NAME>_...``."""


class _SharedVariables(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {field: value for field, name in SHARED_VARIABLES.items() if (value := os.environ.get(name))}


class ChannelSettings(BaseSettings):
    """What every channel reads; subclass it with ``env_prefix="NEXO_<NAME>_"`` and add your own."""

    state_dir: Path = DEFAULT_STATE_DIR
    db_path: Path | None = None
    """Default ``<state_dir>/<name>/<name>.db``."""
    max_pending: int = Field(1000, ge=1)
    """Unacknowledged inbound messages kept before ``inbound`` raises EventLogFull."""
    approval_ttl_s: float = Field(600.0, gt=0, le=600)
    """How long a relayed permission prompt stays answerable from the chat."""
    workspace_dir: Path | None = None
    """The agent's workspace (``NEXO_WORKSPACE_ROOT``), where files sent and received live.
    Default ``<state_dir>/workspace``, the workspace server's default too."""
    max_file_bytes: int = Field(20 * MIB, ge=1)
    """Largest file the channel sends or saves (a platform may cap it lower)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _SharedVariables(settings_cls)

    def channel_dir(self, name: str) -> Path:
        return self.state_dir.expanduser() / name

    def database(self, name: str) -> Path:
        return (self.db_path or self.channel_dir(name) / f"{name}.db").expanduser()

    def workspace(self) -> Path:
        return (self.workspace_dir or self.state_dir / "workspace").expanduser()


def describe_problems(
    error: ValidationError, prefix: str, *, when_missing: Mapping[str, str] | None = None
) -> str:
    """One line naming each bad variable (``<prefix><KEY>: what is wrong``), for a start that fails.

    ``when_missing`` adds a hint to "is not set" per key (``{"BOT_TOKEN": " (from @BotFather)"}``).
    """
    hints = when_missing or {}
    problems = []
    for item in error.errors():
        where = "_".join(str(part) for part in item["loc"]).upper()
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "is not set" + hints.get(where, "")
        problems.append(f"{prefix}{where}: {message}" if where else message)
    return "; ".join(problems)
