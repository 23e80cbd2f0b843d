"""The dashboard as ``nexo run`` serves it: the app, its login keyring and the ledger follower."""

from __future__ import annotations

import anyio
import anyio.abc

from orchestrator.dashboard.app import build_app
from orchestrator.dashboard.auth import Keyring
from orchestrator.dashboard.client import Daemon
from orchestrator.dashboard.feed import LedgerFollower
from orchestrator.dashboard.options import DashboardOptions


class DashboardServer:
    def __init__(self, options: DashboardOptions, daemon: Daemon) -> None:
        self.options = options
        self.keyring = Keyring(login_ttl_s=options.login_ttl_s, session_ttl_s=options.session_ttl_s)
        self.follower = LedgerFollower(daemon)
        self.app = build_app(daemon, self.keyring, self.follower, public_origin=options.public_origin)
        self.url: str | None = None

    async def serve(self, *, task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status`` gets the base URL once the port listens."""
        from shared.hosting.listener import listen, serve_asgi

        port = self.options.port if self.options.port is not None else 0
        host = self.options.host
        # The listener first: a port in use is then this call's own OSError, which the caller
        # reports (``start_dashboard``), not an error inside a task group.
        async with serve_asgi(self.app, listen(host, port)) as bound, anyio.create_task_group() as tg:
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            self.url = self.options.public_origin or f"http://{shown}:{bound[1]}"
            tg.start_soon(self.follower.run, name="dashboard-feed")
            task_status.started(self.url)
            try:
                await anyio.sleep_forever()
            finally:
                self.follower.close()
                tg.cancel_scope.cancel()

    def login(self, operator: str) -> dict[str, object]:
        """A one-time login link for ``operator`` (what ``nexo dashboard`` prints)."""
        token = self.keyring.mint_login(operator)
        return {
            "url": f"{self.url}/",
            "login_url": f"{self.url}/login?token={token}",
            "expires_in_s": self.options.login_ttl_s,
        }
