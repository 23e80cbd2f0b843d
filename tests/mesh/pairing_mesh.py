"""The mesh of the pairing scenarios (tests/mesh/test_pairing*.py): an inbox channel whose owner is
``local``, with the real pairing, audit and memory servers, and the CLI and database reads they check.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.mesh.harness import Orchestrator, nexo, python_server, write_config
from tests.mesh.inbox import inbox_server
from tests.mesh.pairing_corpus import OWNER


def pairing_config(tmp_path: Path, llm_url: str, **pairing: Any) -> Path:
    state = tmp_path / "state"
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=state,
        llm_base_url=llm_url,
        servers={
            "inbox": inbox_server(tmp_path, NEXO_INBOX_MAX_PENDING="20000"),
            "pairing": python_server("servers.pairing"),
            "audit": python_server("servers.audit"),
            "memory": python_server("servers.memory"),
        },
        agent={"channels": ["inbox"]},
        extra={
            "operator": {"channel": "inbox", "chat_id": "op"},
            "channel_options": {
                "inbox": {
                    "rate_per_minute": None,
                    "approval_timeout_s": 60,
                    "pairing": {"policy": "pairing", "allow_from": [OWNER], **pairing},
                }
            },
        },
    )


def pair(config: Path, *args: str) -> dict[str, Any]:
    result = nexo("pair", *args, "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def wait_answered(orch: Orchestrator, count: int, timeout: float) -> None:
    start = 0
    for _ in range(count):
        start = orch.wait_for_line("answered g-", timeout=timeout, start=start) + 1


def audit(config: Path, kind: str) -> list[dict[str, Any]]:
    result = nexo("audit", "tail", "--kind", kind, "-n", "1000", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    entries: list[dict[str, Any]] = json.loads(result.stdout)
    return entries


def transcript_rows(state: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(state / "memory" / "memory.db") as db:
        return db.execute(
            "SELECT s.session_key, t.role FROM transcript t "
            "JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
        ).fetchall()


def memories(state: Path) -> int:
    with sqlite3.connect(state / "memory" / "memory.db") as db:
        return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
