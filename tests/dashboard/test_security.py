"""Every state change needs a session, this session's CSRF token, and a request from this origin to
this host; the login link works once and briefly; every response carries a strict CSP."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from starlette.routing import Route

from orchestrator.dashboard.auth import COOKIE
from orchestrator.dashboard.guard import CSP
from orchestrator.dashboard.options import DashboardOptions
from tests.dashboard.support import BASE, Dashboard, dashboard

pytestmark = pytest.mark.anyio


def _post_routes(board: Dashboard) -> list[str]:
    paths = [
        route.path.replace("{goal_id}", "g-1")
        for route in board.app.routes
        if isinstance(route, Route) and "POST" in (route.methods or ())
    ]
    assert len(paths) >= 7
    return paths


FIELDS = {"request_id": "r1", "behavior": "allow", "pending_id": "p1", "channel": "c", "sender": "s"}


async def test_without_a_session_every_state_change_is_refused_and_pages_lead_to_login(
    tmp_path: Path,
) -> None:
    async with dashboard(tmp_path) as board:
        for path in _post_routes(board):
            answer = await board.client.post(path, data=FIELDS, headers={"origin": BASE})
            assert (path, answer.status_code) == (path, 401)
            assert "nexo dashboard" in answer.text
        page = await board.client.get("/approvals")
        assert (page.status_code, page.headers["location"]) == (303, "/login")
        assert (await board.client.get("/feed/stream")).status_code == 401
        login = await board.client.get("/login")
        assert "`nexo dashboard`" in login.text


async def test_a_forged_or_missing_csrf_token_is_refused_on_every_form(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        for path in _post_routes(board):
            for token in ("forged", None):
                data = {**FIELDS, **({"csrf": token} if token else {})}
                answer = await board.client.post(path, data=data, headers={"origin": BASE})
                assert (path, answer.status_code) == (path, 403)
                assert "CSRF" in answer.text


async def test_a_foreign_origin_is_refused_even_with_a_session_and_its_token(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        csrf = await board.login()
        for path in _post_routes(board):
            for headers in ({"origin": "http://evil.example"}, {"origin": "null"}, {}):
                answer = await board.client.post(path, data={**FIELDS, "csrf": csrf}, headers=headers)
                assert (path, headers, answer.status_code) == (path, headers, 403)


async def test_a_foreign_host_header_is_refused(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        for host in ("evil.example:8765", "127.0.0.1:9999", "nexo.local"):
            answer = await board.client.get("/", headers={"host": host})
            assert (host, answer.status_code) == (host, 421)
        assert (await board.client.get("/login", headers={"host": "localhost:8765"})).status_code == 200


async def test_a_login_link_works_once_and_not_after_it_expires(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        token = board.keyring.mint_login("ana")
        first = await board.client.get(f"/login?token={token}")
        assert first.status_code == 303
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=")
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        board.client.cookies.clear()
        again = await board.client.get(f"/login?token={token}")
        assert again.status_code == 401
        assert "already used or has expired" in again.text
        late = board.keyring.mint_login("ana")
        board.clock[0] += 61
        assert (await board.client.get(f"/login?token={late}")).status_code == 401
        assert (await board.client.get("/approvals")).status_code == 303


async def test_a_session_ends_when_it_expires_and_a_tampered_cookie_is_no_session(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        assert (await board.client.get("/approvals")).status_code == 200
        value = board.client.cookies[COOKIE]
        board.client.cookies.clear()
        board.client.cookies.set(COOKIE, value[:-2] + ("AA" if not value.endswith("AA") else "BB"))
        assert (await board.client.get("/approvals")).status_code == 303
        board.client.cookies.clear()
        board.client.cookies.set(COOKIE, value)
        assert (await board.client.get("/approvals")).status_code == 200
        board.clock[0] += 3601
        assert (await board.client.get("/approvals")).status_code == 303


async def test_every_response_has_a_strict_content_security_policy(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        for path in ("/approvals", "/login", "/static/dashboard.js", "/nowhere"):
            answer = await board.client.get(path)
            assert answer.headers["content-security-policy"] == CSP
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert "'unsafe-inline'" not in CSP


def test_a_bind_beyond_loopback_needs_tls_termination_configured() -> None:
    with pytest.raises(ValidationError, match="tls_terminated"):
        DashboardOptions(port=8765, host="0.0.0.0")
    with pytest.raises(ValidationError, match="public_origin"):
        DashboardOptions(port=8765, host="0.0.0.0", tls_terminated=True)
    proxied = DashboardOptions(
        port=8765, host="0.0.0.0", tls_terminated=True, public_origin="https://nexo.example"
    )
    assert proxied.public_origin == "https://nexo.example"
    assert DashboardOptions().port is None


async def test_after_logging_out_a_copy_of_the_session_cookie_opens_nothing(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        copied = board.client.cookies[COOKIE]
        page = await board.client.get("/approvals")
        assert page.status_code == 200
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        logged_out = await board.client.post("/logout", data={"csrf": csrf}, headers={"origin": BASE})
        assert logged_out.status_code == 200
        board.client.cookies.clear()
        board.client.cookies.set(COOKIE, copied)
        assert (await board.client.get("/approvals")).status_code == 303
        assert (
            await board.client.post("/logout", data={"csrf": csrf}, headers={"origin": BASE})
        ).status_code == 401
