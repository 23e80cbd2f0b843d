"""A dashboard app in this process in front of a real control socket whose approval operations are
the daemon's own (real brokers); the pages that need the whole mesh are in test_browser.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from starlette.applications import Starlette

from orchestrator.control import Emit, serve_control
from orchestrator.dashboard.app import build_app
from orchestrator.dashboard.auth import Keyring
from orchestrator.dashboard.client import Daemon
from orchestrator.dashboard.feed import LedgerFollower
from orchestrator.permissions import ApprovalBroker
from orchestrator.permissions.answers import answer_approval, pending_approvals
from orchestrator.sockets import control_path

BASE = "http://127.0.0.1:8765"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Dashboard:
    app: Starlette
    keyring: Keyring
    brokers: list[ApprovalBroker]
    client: httpx2.AsyncClient
    clock: list[float] = field(default_factory=lambda: [1_000_000.0])

    async def login(self, operator: str = "ana") -> str:
        """Follow a fresh one-time link; the session's CSRF token, read from a page's form."""
        token = self.keyring.mint_login(operator)
        answer = await self.client.get(f"/login?token={token}")
        assert answer.status_code == 303, answer.text
        page = await self.client.get("/approvals")
        found = CSRF.search(page.text)
        assert found is not None, page.text
        return found[1]


def _now(clock: list[float]) -> Callable[[], float]:
    return lambda: clock[0]


@asynccontextmanager
async def dashboard(tmp_path: Path, brokers: list[ApprovalBroker] | None = None) -> AsyncIterator[Dashboard]:
    brokers = brokers if brokers is not None else [ApprovalBroker(agent="nexo")]
    clock = [1_000_000.0]
    keyring = Keyring(login_ttl_s=60, session_ttl_s=3600, clock=_now(clock))

    async def commands(request: dict[str, Any], _: Emit) -> dict[str, Any]:
        if request.get("op") == "approvals":
            return pending_approvals(brokers)
        if request.get("op") == "approve":
            return answer_approval(brokers, request)
        return {"error": f"this test serves no {request.get('op')!r}"}

    def status() -> dict[str, Any]:
        return {"pid": 1, "servers": []}

    path = control_path(tmp_path)
    daemon = Daemon(path, "audit", "pairing", "cron", "memory")
    app = build_app(daemon, keyring, LedgerFollower(daemon))
    async with anyio.create_task_group() as tg:
        await tg.start(serve_control, path, status, commands)
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
            yield Dashboard(app, keyring, brokers, client, clock)
        tg.cancel_scope.cancel()
