"""The sample web-chat channel in whole-mesh scenarios: as its own HTTP process or as nexo's stdio
child, and a browser tab (a WebSocket client) that says messages and collects the answers."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from websockets.asyncio.client import ClientConnection, connect

from tests.mesh.harness import REPO, base_env, nexo_argv

PAGE_TOKEN = "page-token-for-tests"
SERVER_TOKEN = "server-token-for-tests"
CHAT = "tab"
OPEN_MARK = "sample channel: open "
FRAME_TIMEOUT_S = 30.0
_OPEN = re.compile(r"sample channel: open (http://\S+)")


def page_env() -> dict[str, str]:
    """The sample's settings for tests: a fixed page token, a free port for the page each start."""
    return {"NEXO_SAMPLE_TOKEN": PAGE_TOKEN, "NEXO_SAMPLE_PORT": "0"}


def page_urls(lines: list[str], start: int = 0) -> list[str]:
    return [m.group(1) for line in lines[start:] if (m := _OPEN.search(line))]


class Lines:
    """The stderr lines of a process, read by a thread, waited on with a bound."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[str]], bool], what: str, timeout: float = 60.0) -> None:
        with self._changed:
            if not self._changed.wait_for(
                lambda: found(self.lines) or self.process.poll() is not None, timeout=timeout
            ) or not found(self.lines):
                raise AssertionError(f"no {what}; stderr:\n" + "\n".join(self.lines[-30:]))

    def close(self) -> None:
        self._reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


class HttpSample:
    """``nexo serve sample --http 127.0.0.1:PORT``: started, stopped and started again on one port."""

    def __init__(self, port: int, state_dir: Path) -> None:
        self.port = port
        self.state_dir = state_dir
        self.runs: list[Lines] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, token: str = SERVER_TOKEN, *, page: bool = True) -> str:
        """Start it; return its page URL once it listens, or without ``page`` its MCP URL (the page
        opens with the first MCP session)."""
        env = base_env({"NEXO_SERVER_TOKEN": token, "NEXO_STATE_DIR": str(self.state_dir), **page_env()})
        process = subprocess.Popen(
            nexo_argv("serve", "sample", "--http", f"127.0.0.1:{self.port}"),
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        run = Lines(process)
        self.runs.append(run)
        if not page:
            run.wait_for(lambda lines: any("over HTTP at" in line for line in lines), "MCP URL")
            return self.url
        run.wait_for(lambda lines: bool(page_urls(lines)), "page URL from the sample channel")
        return page_urls(run.lines)[-1]

    def stop(self, signum: signal.Signals = signal.SIGTERM) -> int:
        """Signal the running server and wait for it to exit; its exit status."""
        run = self.runs[-1]
        run.process.send_signal(signum)
        code = run.process.wait(timeout=30)
        run.close()
        return code

    def close(self) -> None:
        for run in self.runs:
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait(timeout=10)
            run.close()


def http_sample_config(sample: HttpSample, token: str = SERVER_TOKEN) -> dict[str, Any]:
    return {"transport": "http", "url": sample.url, "token": token}


@asynccontextmanager
async def tab(page_url: str) -> AsyncIterator[Tab]:
    """A browser tab of the chat ``CHAT`` on the page at ``page_url``."""
    netloc = urlsplit(page_url).netloc
    async with connect(f"ws://{netloc}/ws?token={PAGE_TOKEN}&chat={CHAT}") as ws:
        opened = Tab(ws)
        assert await opened.frame() == {"type": "welcome", "chat_id": CHAT}
        yield opened


class Tab:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.replies: list[dict[str, Any]] = []

    async def frame(self) -> dict[str, Any]:
        with anyio.fail_after(FRAME_TIMEOUT_S):
            decoded: dict[str, Any] = json.loads(await self.ws.recv())
        return decoded

    async def say(self, message_id: str, text: str) -> None:
        await self.ws.send(json.dumps({"id": message_id, "text": text}))
        while (frame := await self.frame())["type"] != "queued":
            self._keep(frame)
        assert frame["id"] == message_id, frame

    async def answer_to(self, message_id: str, timeout: float = FRAME_TIMEOUT_S) -> str:
        """The text of the reply to ``message_id`` (perhaps already received)."""
        with anyio.fail_after(timeout):
            while True:
                for reply in self.replies:
                    if reply["reply_to"] == message_id:
                        return str(reply["text"])
                self._keep(await self.frame())

    def _keep(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "reply":
            self.replies.append(frame)
