"""The pairing server: no tools at all, only the ``nexo/pairing`` control plane (see ``control.py``).

Whether a sender may reach the model, and who is paired, is decided only by the orchestrator and the
operator through control methods; a model never sees them.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from servers.pairing.control import PairingExtension
from servers.pairing.errors import KeyFileError
from servers.pairing.settings import PairingSettings
from servers.pairing.store import MIGRATIONS, Clock, CodeBook, Limits, PairingStore, utc_now
from shared.db import Database
from shared.hosting.capabilities import advertise_experimental
from shared.hosting.main import server_main
from shared.private import create_private_file
from shared.protocol.pairing import PAIRING_EXTENSION
from shared.protocol.storage import StorageExtension
from shared.serverkit import NexoServer

KEY_BYTES = 32


# -- resources --------------------------------------------------------------------------------


def load_or_create_key(path: Path) -> bytes:
    """The code key in ``path`` (created with mode 0600 in a 0700 directory when missing)."""
    try:
        if not path.exists():
            create_private_file(path, secrets.token_bytes(KEY_BYTES))
        mode = path.stat().st_mode & 0o777
        key = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(
            f"{path}: cannot create or read the pairing code key ({exc.strerror}); point "
            "NEXO_PAIRING_STATE_DIR (or NEXO_PAIRING_KEY_PATH) at a place this user can write"
        ) from exc
    if mode & 0o077:
        raise KeyFileError(f"{path} is readable by other users (mode {mode:o}); run `chmod 600 {path}`")
    if len(key) != KEY_BYTES:
        raise KeyFileError(
            f"{path} holds {len(key)} bytes, not {KEY_BYTES}: restore it from a backup, or delete it to "
            "start a new key (codes issued so far can then no longer be approved)"
        )
    return key


@asynccontextmanager
async def open_store(settings: PairingSettings, *, clock: Clock = utc_now) -> AsyncIterator[PairingStore]:
    """The key and the database of ``settings``, open for the duration of the block."""
    key = await anyio.to_thread.run_sync(load_or_create_key, settings.key_file)
    async with Database.open(
        settings.database,
        MIGRATIONS,
        synchronous="FULL",
        busy_timeout_ms=settings.busy_timeout_ms,
        inline=True,
    ) as db:
        yield PairingStore(db, CodeBook(key), Limits.of(settings), clock=clock)


def build_server(settings: PairingSettings, *, clock: Clock = utc_now) -> MCPServer[PairingStore]:
    @asynccontextmanager
    async def lifespan(_: MCPServer[PairingStore]) -> AsyncIterator[PairingStore]:
        async with open_store(settings, clock=clock) as store:
            yield store

    extension = PairingExtension()
    server: MCPServer[PairingStore] = NexoServer(
        "pairing",
        instructions=(
            "The gate for inbound chat senders: paired senders, pending pairing codes and the approval "
            "lockout. It offers no tools; the orchestrator and the operator use its nexo/pairing "
            "control methods."
        ),
        lifespan=lifespan,
        extensions=[extension, StorageExtension(lambda store: [store.db.storage])],
    )
    advertise_experimental(server, {PAIRING_EXTENSION: extension.settings()})
    return server


def main() -> int:
    def build() -> MCPServer[Any]:
        return build_server(PairingSettings())

    return server_main("servers.pairing", build)
