"""SIGKILL the memory server in the middle of bulk writes, many times; the database must stay whole.

Each round starts ``python -m servers.memory``, speaks MCP to it over stdio by hand (newline-delimited
JSON-RPC, so the test owns the process and can kill it), pipelines a burst of writes (new memories,
duplicates, forgets and transcript appends) and kills the process with SIGKILL as soon as a
seeded-random number of them were acknowledged, while the rest are still in flight. Afterwards:
``PRAGMA integrity_check`` is ok, every memory has its FTS entry and its vector and no FTS entry or
vector is orphaned, every word's count is the full-text index's own, and every acknowledged write is
there (``synchronous=FULL``).
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import sqlean
import sqlite_vec

from tests.servers.memory.test_stdio import REPO, server_env

pytestmark = pytest.mark.scenario

ROUNDS = 15
BURST = 60
SEED = 20261121
WAIT_S = 60.0


@dataclass
class Acked:
    memories: dict[int, str] = field(default_factory=dict)
    """id -> content of every memory whose creation was acknowledged (and not forgotten since)."""
    forgotten: set[int] = field(default_factory=set)
    """Memories whose forget was acknowledged."""
    doomed: set[int] = field(default_factory=set)
    """Memories a forget was sent for: gone or not, depending on whether it ran before the kill."""
    transcript: list[str] = field(default_factory=list)


class Wire:
    """JSON-RPC over a child's pipes; replies are read by a thread so every wait is bounded."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin: IO[bytes] = process.stdin
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            if line.strip():
                self.replies.put(json.loads(line))
        self.replies.put(None)

    def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")
        self._stdin.flush()

    def reply(self) -> dict[str, Any]:
        while True:
            message = self.replies.get(timeout=WAIT_S)
            if message is None:
                raise AssertionError(f"the server exited early with status {self.process.wait(10)}")
            if "id" in message:
                return message

    def join(self) -> None:
        self._reader.join(timeout=WAIT_S)


@contextmanager
def server(state: Path) -> Iterator[Wire]:
    process = subprocess.Popen(
        [sys.executable, "-m", "servers.memory"],
        # The model stays loaded: each round should spend its time writing, not loading the model.
        env={**os.environ, **server_env(state, NEXO_MEMORY_EMBEDDING__IDLE_UNLOAD_S="0")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    wire = Wire(process)
    try:
        wire.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "crash-test", "version": "0"},
                },
            }
        )
        assert "result" in wire.reply()
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield wire
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=WAIT_S)
        wire.join()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def remember(request_id: int, content: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "memory_remember", "arguments": {"content": content}},
    }


def forget(request_id: int, memory_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "memory_forget", "arguments": {"id": memory_id}},
    }


def append(request_id: int, session_id: int, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "nexo/memory/session/append",
        "params": {
            "agent": "nexo",
            "sessionId": session_id,
            "entries": [{"role": "user", "content": text, "dedupe_key": text}],
        },
    }


def one_round(state: Path, rng: random.Random, number: int, acked: Acked) -> None:
    with server(state) as wire:
        wire.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "nexo/memory/session/resolve",
                "params": {"agent": "nexo", "sessionKey": "crash"},
            }
        )
        session_id = wire.reply()["result"]["sessionId"]
        sent: dict[int, tuple[str, Any]] = {}
        candidates = [i for i in acked.memories if rng.random() < 0.2]
        for n in range(BURST):
            request_id = 100 + n
            roll = rng.random()
            if candidates and roll < 0.15:
                victim = candidates.pop()
                acked.doomed.add(victim)
                sent[request_id] = ("forget", victim)
                wire.send(forget(request_id, victim))
            elif roll < 0.3:
                text = f"round {number} line {n}"
                sent[request_id] = ("append", text)
                wire.send(append(request_id, session_id, text))
            else:
                # Some contents repeat across rounds: the duplicate (refresh) path gets killed too.
                topic = rng.choice(["cat", "sea", "tea"])
                content = f"memory {rng.randrange(400)} about the garden and the {topic}"
                sent[request_id] = ("remember", content)
                wire.send(remember(request_id, content))
        kill_after = rng.randint(1, BURST // 2)
        for _ in range(kill_after):
            reply = wire.reply()
            op, value = sent[reply["id"]]
            result = reply.get("result", {})
            if result.get("isError") or "error" in reply:
                continue
            if op == "remember":
                acked.memories[result["structuredContent"]["id"]] = value
            elif op == "forget":
                acked.memories.pop(value, None)
                acked.forgotten.add(value)
            else:
                acked.transcript.append(value)
        wire.process.send_signal(signal.SIGKILL)


def open_checked(path: Path) -> sqlite3.Connection:
    conn: sqlite3.Connection = sqlean.connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    return conn


@pytest.mark.timeout(600)  # fifteen server starts: about 60 s idle, 210 s on a loaded 2-core machine
def test_sigkill_during_bulk_writes_never_breaks_the_database(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    acked = Acked()
    for number in range(ROUNDS):
        one_round(tmp_path, rng, number, acked)
    conn = open_checked(tmp_path / "memory" / "memory.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        memories = dict(conn.execute("SELECT id, content FROM memories").fetchall())
        fts = {row[0] for row in conn.execute("SELECT id FROM memories_fts_docsize")}
        vectors = vector_ids(conn)
        transcript = {row[0] for row in conn.execute("SELECT content FROM transcript")}
        conn.execute("CREATE VIRTUAL TABLE temp.vocabulary USING fts5vocab(main, memories_fts, row)")
        indexed_words = dict(conn.execute("SELECT term, doc FROM temp.vocabulary").fetchall())
        counted_words = dict(conn.execute("SELECT term, documents FROM memory_terms").fetchall())
    finally:
        conn.close()
    assert fts == set(memories), "FTS entries and memories differ"
    assert vectors == set(memories), "vectors and memories differ"
    assert counted_words == indexed_words, "the word counts and the full-text index differ"
    kept = {i: content for i, content in acked.memories.items() if i not in acked.doomed}
    assert {i: memories.get(i) for i in kept} == kept
    assert not acked.forgotten & set(memories)
    assert set(acked.transcript) <= transcript
    assert len(acked.memories) > ROUNDS


def vector_ids(conn: sqlite3.Connection) -> set[int]:
    return {int(row[0]) for row in conn.execute("SELECT memory_id FROM memory_vectors")}
