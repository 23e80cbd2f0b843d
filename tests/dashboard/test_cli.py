"""``nexo dashboard`` asks the running daemon for a one-time login link, and says what to do when
the dashboard is off or nexo is not running."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from orchestrator.cli.main import main
from orchestrator.control import Emit, serve_control
from orchestrator.dashboard.client import Daemon
from orchestrator.dashboard.ops import dashboard_command
from orchestrator.dashboard.options import DashboardOptions
from orchestrator.dashboard.serve import DashboardServer
from orchestrator.intake import Intake
from orchestrator.sockets import control_path
from tests.mesh.harness import write_config

pytestmark = pytest.mark.anyio


class Surfaces:
    """The two things of the daemon the dashboard's control operations use."""

    def __init__(self, dashboard: DashboardServer | None) -> None:
        self.intakes: list[Intake] = []
        self.dashboard = dashboard


async def _nexo_dashboard(
    config: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    code = await anyio.to_thread.run_sync(main, ["dashboard", "--config", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


async def test_nexo_dashboard_prints_a_login_link_that_opens_a_session_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = write_config(tmp_path / "agents.yaml", state_dir=state, llm_base_url="http://127.0.0.1:9/v1")
    server = DashboardServer(
        DashboardOptions(port=0), Daemon(control_path(state), "audit", "pairing", "cron", "memory")
    )
    surfaces = Surfaces(server)

    async def commands(request: dict[str, Any], _: Emit) -> dict[str, Any]:
        return dashboard_command(surfaces, request)

    async with anyio.create_task_group() as tg:
        url = await tg.start(server.serve)
        await tg.start(serve_control, control_path(state), dict, commands)
        code, out, _ = await _nexo_dashboard(config, capsys, "--json")
        assert code == 0
        shown = json.loads(out)
        assert shown["url"] == f"{url}/"
        assert shown["expires_in_s"] == 120
        assert shown["login_url"].startswith(f"{url}/login?token=")
        async with httpx2.AsyncClient() as client:
            first = await client.get(shown["login_url"])
            second = await client.get(shown["login_url"])
        assert (first.status_code, first.headers["location"]) == (303, "/")
        assert second.status_code == 401
        code, out, _ = await _nexo_dashboard(config, capsys)
        assert code == 0
        assert out.splitlines()[0] == f"dashboard: {url}/"
        assert out.splitlines()[1].startswith(f"log in (once, within 120 s): {url}/login?token=")

        surfaces.dashboard = None
        code, _, err = await _nexo_dashboard(config, capsys)
        assert code == 1
        assert "the dashboard is off: set dashboard.port (e.g. 8780)" in err
        tg.cancel_scope.cancel()

    code, _, err = await _nexo_dashboard(config, capsys)
    assert code == 1
    assert "start it with `nexo run`" in err


async def test_a_dashboard_port_in_use_is_logged_and_the_daemon_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from orchestrator.config.loading import load
    from orchestrator.dashboard.ops import start_dashboard

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = load(
            write_config(
                tmp_path / "agents.yaml",
                state_dir=state,
                llm_base_url="http://127.0.0.1:9/v1",
                extra={"dashboard": {"port": port}},
            )
        )
        async with anyio.create_task_group() as tg:
            assert await start_dashboard(tg, config, control_path(state)) is None
            tg.cancel_scope.cancel()
    assert (
        f"dashboard not served: cannot listen on 127.0.0.1:{port}: Address already in use; another process "
        f"already listens there (see it with `ss -ltnp 'sport = :{port}'`); stop it, or choose another port "
        "with dashboard.port (nexo goes on without it)"
    ) in caplog.text
