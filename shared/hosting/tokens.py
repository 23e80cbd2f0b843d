"""Where an HTTP server's bearer token comes from: the environment, a 0600 file, or one generated."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shared.hosting.errors import HostingError
from shared.private import create_private_file

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
GENERATED_TOKENS_DIR = "http-tokens"
"""Where a generated bearer token is kept: ``<NEXO_STATE_DIR>/http-tokens/<server>.token``."""


def _read_secret_file(path: Path) -> str:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise HostingError(f"{path} is readable by other users (mode {mode:o}); run `chmod 600 {path}`")
    return path.read_text().strip()


def default_token_path(name: str, env: Mapping[str, str]) -> Path:
    """Where the bearer token of server ``name`` is generated when none is configured."""
    state = Path(env.get("NEXO_STATE_DIR") or DEFAULT_STATE_DIR).expanduser()
    return state / GENERATED_TOKENS_DIR / f"{name.rpartition('.')[2]}.token"


def generated_token(path: Path) -> str:
    """The token kept in ``path``, created (0600, 32 random bytes) when the file does not exist."""
    if not path.exists():
        try:
            create_private_file(path, (secrets.token_urlsafe(32) + "\n").encode())
        except OSError as exc:
            raise HostingError(
                f"cannot write a bearer token to {path}: {exc.strerror or exc}; set NEXO_SERVER_TOKEN, "
                "or NEXO_SERVER_TOKEN_FILE to a file this user can write"
            ) from exc
    return _read_secret_file(path)


@dataclass(frozen=True, slots=True)
class TokenSource:
    """Where an HTTP server's bearer token came from, for the line printed at start."""

    kind: Literal["env", "file", "generated"]
    path: Path | None = None

    def describe(self) -> str:
        if self.kind == "env":
            return "bearer token from NEXO_SERVER_TOKEN"
        if self.kind == "file":
            return f"bearer token in {self.path}"
        return f"bearer token generated into {self.path} (0600): clients send it as `Authorization: Bearer`"


def token_source(env: Mapping[str, str], name: str) -> TokenSource:
    if env.get("NEXO_SERVER_TOKEN"):
        return TokenSource("env")
    configured = env.get("NEXO_SERVER_TOKEN_FILE")
    if configured:
        return TokenSource("file", Path(configured).expanduser())
    return TokenSource("generated", default_token_path(name, env))
