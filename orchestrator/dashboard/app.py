"""The dashboard's Starlette app: routes, the login link, the guard in front of everything."""

from __future__ import annotations

from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from orchestrator.dashboard import activity, approvals, goals, health, memory, people, schedules, spend
from orchestrator.dashboard.auth import COOKIE, Keyring
from orchestrator.dashboard.client import Daemon
from orchestrator.dashboard.feed import LedgerFollower
from orchestrator.dashboard.forms import checked_form
from orchestrator.dashboard.guard import Guard
from orchestrator.dashboard.layout import keyring_of, session_of

LOGIN_HELP = "Log in with the one-time link `nexo dashboard` prints (it works once, for a short while)."


async def login(request: Request) -> Response:
    keyring: Keyring = request.app.state.keyring
    token = request.query_params.get("token", "")
    session = keyring.redeem(token) if token else None
    if session is None:
        status = 401 if token else 200
        text = ("That login link was already used or has expired. " if token else "") + LOGIN_HELP
        return PlainTextResponse(text, status_code=status)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        COOKIE,
        keyring.cookie_value(session),
        max_age=int(keyring.session_ttl_s),
        httponly=True,
        samesite="strict",
        secure=request.app.state.secure_cookie,
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    await checked_form(request)
    keyring_of(request).end(session_of(request))
    response = PlainTextResponse("Logged out. " + LOGIN_HELP)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code)


def build_app(
    daemon: Daemon, keyring: Keyring, follower: LedgerFollower, *, public_origin: str | None = None
) -> Starlette:
    static = resources.files("orchestrator.dashboard") / "static"
    app = Starlette(
        routes=[
            Route("/login", login, methods=["GET"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/", activity.activity, methods=["GET"]),
            Route("/feed/stream", activity.stream, methods=["GET"]),
            Route("/approvals", approvals.approvals, methods=["GET"]),
            Route("/approvals/answer", approvals.answer, methods=["POST"]),
            Route("/goals", goals.goals, methods=["GET"]),
            Route("/goals/{goal_id}", goals.goal, methods=["GET"]),
            Route("/goals/{goal_id}/cancel", goals.cancel, methods=["POST"]),
            Route("/people", people.people, methods=["GET"]),
            Route("/people/approve", people.approve, methods=["POST"]),
            Route("/people/deny", people.deny, methods=["POST"]),
            Route("/people/revoke", people.revoke, methods=["POST"]),
            Route("/schedules", schedules.schedules, methods=["GET"]),
            Route("/schedules/change", schedules.change, methods=["POST"]),
            Route("/spend", spend.spend, methods=["GET"]),
            Route("/memory", memory.memory, methods=["GET"]),
            Route("/memory/forget", memory.forget, methods=["POST"]),
            Route("/health", health.health, methods=["GET"]),
            Route("/autonomy", health.autonomy, methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
        middleware=[Middleware(Guard, keyring=keyring, public_origin=public_origin)],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.daemon = daemon
    app.state.keyring = keyring
    app.state.follower = follower
    app.state.secure_cookie = public_origin is not None
    return app
