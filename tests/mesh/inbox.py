"""Driving ``tests.fakes.inbox_channel`` from a test: its server entry, messages in, replies out.

Everything lives in one directory (usually the test's ``tmp_path``): ``inbox.sock`` takes messages,
``replies.jsonl`` collects what the channel sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shared import unix_socket
from tests.mesh.harness import python_server

OPERATOR = "operator"
BATCH = 500


def inbox_server(directory: Path, **env: str) -> dict[str, Any]:
    """The server entry of an inbox channel in ``directory``; ``env`` adds NEXO_INBOX_* settings."""
    return python_server(
        "tests.fakes.inbox_channel",
        env={
            "NEXO_INBOX_SOCKET": str(directory / "inbox.sock"),
            "NEXO_INBOX_REPLIES": str(directory / "replies.jsonl"),
            **env,
        },
    )


def replies(directory: Path) -> list[dict[str, Any]]:
    """What the channel sent so far: ``{"chat_id", "text"}`` replies and ``{"prompt"}`` relays."""
    path = directory / "replies.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def reply_texts(directory: Path) -> list[str]:
    return [reply["text"] for reply in replies(directory) if "text" in reply]


async def send(directory: Path, messages: Iterable[dict[str, Any]]) -> None:
    """Messages ``{"content", "meta"}`` (and optionally ``"id"``, else the meta's message_id)."""
    stream = await unix_socket.connect(directory / "inbox.sock")
    async with stream:
        batch: list[bytes] = []
        for n, message in enumerate(messages):
            key = message.get("id") or message["meta"].get("message_id", f"x{n}")
            batch.append(json.dumps({**message, "id": key}).encode() + b"\n")
            if len(batch) == BATCH:
                await stream.send(b"".join(batch))
                batch.clear()
        if batch:
            await stream.send(b"".join(batch))


async def say(directory: Path, message_id: str, text: str, *, user_id: str = OPERATOR) -> None:
    """One direct message from ``user_id`` in the operator's chat ``op``."""
    meta = {"chat_id": "op", "message_id": message_id, "user_id": user_id}
    await send(directory, [{"content": text, "meta": meta}])
