"""Files a channel sends: a path inside the agent's workspace, checked before it is queued."""

from __future__ import annotations

import mimetypes
import stat
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MIME = "application/octet-stream"


class FileRefused(ValueError):
    """The path cannot be sent: outside the workspace, not a regular file, or too large."""


@dataclass(frozen=True, slots=True)
class OutboundFile:
    path: Path
    """Resolved (symlinks followed), inside the workspace."""
    relative: str
    size: int
    mime: str


def resolve_outbound_file(workspace: Path, path: str, max_bytes: int) -> OutboundFile:
    """``path`` (relative to the workspace) as a regular file inside it of at most ``max_bytes``."""
    if not path.strip():
        raise FileRefused(f"path {path!r} is empty; pass a file path relative to the workspace")
    root = workspace.expanduser().resolve()
    candidate = Path(path).expanduser()
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise FileRefused(
            f"path {path!r} leaves the workspace {root} (symlinks are followed); only files inside "
            "the workspace can be sent: copy the file into it first"
        )
    try:
        info = resolved.stat()
    except FileNotFoundError:
        raise FileRefused(
            f"path {path!r} does not exist in the workspace; list the workspace to find the file"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"path {path!r} is not a regular file; send a file, not a directory or device")
    if info.st_size > max_bytes:
        raise FileRefused(
            f"file {path!r} has {info.st_size} bytes, more than the {max_bytes} this channel sends; "
            "send a smaller file (compress or split it)"
        )
    mime = mimetypes.guess_type(resolved.name)[0] or DEFAULT_MIME
    return OutboundFile(resolved, str(resolved.relative_to(root)), info.st_size, mime)
