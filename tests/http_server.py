"""A built-in nexo server as a real process over Streamable HTTP, for tests that need the wire."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 60


@contextmanager
def http_server(module: str, state_dir: Path, token: str, args: Sequence[str] = ()) -> Iterator[str]:
    """One built-in server over Streamable HTTP on a free loopback port, requiring ``token``;
    yields its MCP URL. ``args`` come before ``--http`` (``orchestrator.cli.main`` takes its command)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXO_")}
    env.update(
        NEXO_STATE_DIR=str(state_dir), NEXO_LOG_LEVEL="INFO", PYTHONUNBUFFERED="1", NEXO_SERVER_TOKEN=token
    )
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args, "--http", "127.0.0.1:0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    found: list[str] = []
    lines: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            match = re.search(r"over HTTP at (http://\S+)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        if not ready.wait(READY_TIMEOUT_S) or not found:
            raise RuntimeError(f"{module} did not start over HTTP:\n{''.join(lines)}")
        yield found[0]
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
