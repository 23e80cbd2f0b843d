"""What a full disk looks like to the operator: a full file as ``nexo status`` and the notices name
it, and ``nexo setup doctor``'s findings. Apart from the watch (``orchestrator.storage``), so the
doctor reads the daemon's report without importing the mesh and the SDK."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.doctor import Finding
from shared.db import RECOVERED_FREE_BYTES

FIX = "free space on that filesystem (`df -h` shows it); writes resume by themselves, nothing stored was lost"


@dataclass(frozen=True, slots=True)
class FullFile:
    server: str
    path: str
    since: str | None

    def detail(self) -> str:
        return f"the disk holding {self.path} is full since {self.since}: it refuses to store anything new"

    def sentence(self) -> str:
        return f"server {self.server}: {self.detail()}; {FIX}"

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "path": self.path, "since": self.since}


def storage_findings(state_dir: Path, daemon_status: Mapping[str, Any] | None) -> list[Finding]:
    """`nexo setup doctor`: full disks the running daemon knows of, and the local state directory."""
    found = []
    for entry in (daemon_status or {}).get("storage", []):
        file = FullFile(server=str(entry["server"]), path=str(entry["path"]), since=entry.get("since"))
        found.append(Finding("error", "storage.full", file.server, file.detail(), FIX))
    probe = state_dir if state_dir.exists() else state_dir.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return found
    if free < RECOVERED_FREE_BYTES:
        found.append(
            Finding(
                "error",
                "storage.free",
                str(state_dir),
                f"the disk holding the state directory has {free} bytes free: servers refuse to store "
                "messages",
                FIX,
            )
        )
    return found
