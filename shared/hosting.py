"""Run any nexo MCP server over stdio or Streamable HTTP.

This is the only module that touches the SDK's serving entry points, so the next SDK reshape is a
one-file change. Over HTTP it enforces a bearer token on every bind, loopback included (one is
generated into a 0600 file when none is configured), DNS-rebinding protection with configurable
allowed hosts, and serves an unauthenticated ``/healthz``.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from shared.net import is_loopback
from shared.private import create_private_file

logger = logging.getLogger("nexo.hosting")

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
GENERATED_TOKENS_DIR = "http-tokens"
"""Where a generated bearer token is kept: ``<NEXO_STATE_DIR>/http-tokens/<server>.token``."""


class HostingError(Exception):
    """A server cannot be hosted as configured; the message says how to fix it."""


def parse_bind(value: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:PORT`` for IPv6) as given to ``--http``."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise HostingError(f"--http expects HOST:PORT, e.g. 127.0.0.1:8765; got {value!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise HostingError(f"port {port} is out of range 0-65535 in {value!r}")
    return host.strip("[]") or "127.0.0.1", port


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How to serve one server over Streamable HTTP."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    allowed_hosts: Sequence[str] = ()
    """Extra ``Host`` header values to accept, e.g. ``memory:8765`` or ``memory:*`` for compose."""
    allowed_origins: Sequence[str] = ()
    max_request_bytes: int = 1024 * 1024

    def check(self) -> None:
        # Loopback is no boundary: every local user and every page a local browser opens can reach it.
        if not self.token:
            raise HostingError(
                f"refusing to serve over HTTP on {self.host}:{self.port} without a bearer token: "
                "set NEXO_SERVER_TOKEN, or NEXO_SERVER_TOKEN_FILE naming a 0600 file (created with a "
                "new token if it does not exist)"
            )

    def security(self) -> TransportSecuritySettings:
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
        origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
        if not is_loopback(self.host) and self.host not in ("0.0.0.0", "::"):  # noqa: S104
            hosts += [self.host, f"{self.host}:*"]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*hosts, *self.allowed_hosts],
            allowed_origins=[*origins, *self.allowed_origins],
        )


@dataclass(slots=True)
class ServerStatus:
    """What ``/healthz`` reports; servers may add fields through ``extra``."""

    name: str
    extra: Callable[[], Mapping[str, Any]] | None = field(default=None)

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "ok", "server": self.name}
        if self.extra is not None:
            body.update(self.extra())
        return body


def advertise_experimental(server: MCPServer[Any], capabilities: Mapping[str, Mapping[str, Any]]) -> None:
    """Declare ``capabilities.experimental`` entries in the handshake-era ``InitializeResult``.

    ``MCPServer`` has no public hook for experimental capabilities, yet Claude Code recognises a
    channel only by ``experimental["claude/channel"]``. The low-level server builds its
    initialization options on demand, for stdio and for every HTTP session, so wrapping that one
    method covers every transport. This is the single place that reaches past the public API.
    """
    lowlevel = server._lowlevel_server
    original = lowlevel.create_initialization_options
    merged = {key: dict(value) for key, value in capabilities.items()}

    def create_initialization_options(
        notification_options: Any = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        combined = {**merged, **(experimental_capabilities or {})}
        return original(notification_options, combined, extensions)

    lowlevel.create_initialization_options = create_initialization_options  # type: ignore[method-assign]


ResourceHandler = Callable[[Any, Any], Awaitable[Any]]
"""``(ServerRequestContext, params) -> result`` of a low-level request handler."""


def serve_resource_subscriptions(
    server: MCPServer[Any],
    *,
    on_list: ResourceHandler,
    on_subscribe: ResourceHandler,
    on_unsubscribe: ResourceHandler,
) -> None:
    """Serve the handshake era's ``resources/subscribe`` and ``resources/unsubscribe``, take over
    ``resources/list`` (so the server learns which connections list its resources), and advertise
    ``resources.subscribe`` and ``resources.listChanged`` in the ``InitializeResult``.

    ``MCPServer`` offers none of this publicly; like :func:`advertise_experimental` it is done here
    so the reach past the public API stays in this module. The 2026-07-28 discovery result is left as
    the SDK derives it: that era has no standing channel to push on.
    """
    import mcp_types as types
    from mcp.server import NotificationOptions

    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, on_list)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe)
    original = lowlevel.create_initialization_options

    def create_initialization_options(
        notification_options: Any = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions()
        options.resources_changed = True
        return original(options, experimental_capabilities, extensions)

    lowlevel.create_initialization_options = create_initialization_options  # type: ignore[method-assign]


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` on every path except the health check."""

    def __init__(self, app: ASGIApp, token: str, realm: str) -> None:
        self.app = app
        self.token = token.encode()
        self.realm = realm

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() != b"bearer" or not presented:
            await self._refuse(scope, receive, send, "missing bearer token", None)
            return
        if not hmac.compare_digest(presented.strip(), self.token):
            await self._refuse(scope, receive, send, "invalid bearer token", "invalid_token")
            return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, why: str, error: str | None) -> None:
        challenge = f'Bearer realm="{self.realm}"' + (f', error="{error}"' if error else "")
        response = JSONResponse(
            {"error": error or "unauthorized", "error_description": why},
            status_code=401,
            headers={"WWW-Authenticate": challenge},
        )
        await response(scope, receive, send)


def build_http_app(
    server: MCPServer[Any], options: HttpOptions, status: ServerStatus | None = None
) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp`` plus ``/healthz``, with auth and host checks."""
    options.check()
    report = status or ServerStatus(name=server.name)

    async def healthz(_: Request) -> Response:
        return JSONResponse(report.payload())

    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=options.security(),
        max_request_body_size=options.max_request_bytes,
        host=options.host,
    )
    mcp_app.router.routes.append(Route(HEALTH_PATH, healthz, methods=["GET"]))
    assert options.token is not None  # options.check() refused a missing one
    return BearerAuth(mcp_app, options.token, realm=server.name)


class ListenError(OSError):
    """A listener cannot bind; ``reason`` is the system's word for why (e.g. address in use)."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        self.host, self.port = host, port
        self.reason = cause.strerror or str(cause)
        super().__init__(cause.errno, f"cannot listen on {host}:{port} ({self.reason}); is the port in use?")

    def advice(self, setting: str) -> str:
        """One line naming the port, why it cannot be used, and what to do about it."""
        if self.errno == errno.EADDRINUSE:
            fix = (
                f"another process already listens there (see it with `ss -ltnp 'sport = :{self.port}'`); "
                f"stop it, or choose another port with {setting}"
            )
        elif self.errno == errno.EACCES:
            fix = f"ports below 1024 need privileges; choose a port above 1024 with {setting}"
        else:
            fix = f"choose another address with {setting}"
        return f"cannot listen on {self.host}:{self.port}: {self.reason}; {fix}"


def listen(host: str, port: int) -> socket.socket:
    """Bind and listen now: a port in use is an OSError naming it, and port 0 tells the real port.

    Listening before the server runs also means a client arriving early waits instead of failing.
    The protocol is named (``IPPROTO_TCP``, not 0) because accepted sockets inherit it and asyncio
    switches Nagle's algorithm off (``TCP_NODELAY``) only on sockets that say TCP: without it every
    response written as headers then body waits ~40 ms for the client's delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(host, port, exc) from exc
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serve_asgi(
    app: ASGIApp,
    sock: socket.socket,
    *,
    lifespan: Literal["on", "off"] = "off",
    server_header: bool = True,
    header_timeout_s: float | None = None,
) -> AsyncIterator[tuple[str, int]]:
    """Serve ``app`` on a listening ``sock`` (see :func:`listen`) while the block runs; yields the
    bound host and port. On exit, or when cancelled, new connections are refused and requests in
    flight get up to 5 s to finish. Signals stay with the hosting process (uvicorn's own capture is
    switched off), so one process can embed several servers and still drain on SIGTERM itself.

    The one place every HTTP listener of nexo goes through: MCP over HTTP, a channel's web side,
    webhooks, metrics. ``header_timeout_s`` closes connections whose headers trickle in (see
    :mod:`shared.http_deadline`).
    """
    import uvicorn

    from shared.http_deadline import header_deadline_protocol

    class Embedded(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=server_header,
        lifespan=lifespan,
        timeout_graceful_shutdown=5,
        http="auto" if header_timeout_s is None else header_deadline_protocol(header_timeout_s),
    )
    server = Embedded(config)
    finished = anyio.Event()

    async def run() -> None:
        # Shielded so a cancel from outside becomes a graceful shutdown that closes every connection.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve(sockets=[sock])
            finally:
                sock.close()
                finished.set()

    host, port = sock.getsockname()[:2]
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield str(host), int(port)
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await finished.wait()


def mcp_url(host: str, port: int) -> str:
    """The URL clients connect to (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


async def serve_http(
    server: MCPServer[Any],
    options: HttpOptions,
    *,
    status: ServerStatus | None = None,
    on_ready: Callable[[str, int], Awaitable[None]] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve until cancelled. ``on_ready`` receives the bound host and port (useful with port 0).
    ``sock`` is a socket already listening (see :func:`listen`); without one it is bound here."""
    app = build_http_app(server, options, status)
    if sock is None:
        try:
            sock = listen(options.host, options.port)
        except ListenError as exc:
            raise HostingError(exc.advice("--http HOST:PORT")) from None
    async with serve_asgi(app, sock, lifespan="on") as (host, port):
        logger.info("serving %s over HTTP at %s", server.name, mcp_url(host, port))
        if on_ready is not None:
            await on_ready(host, port)
        await anyio.sleep_forever()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve on stdin/stdout. When the client is gone (a SIGKILLed orchestrator), the next answer
    meets a broken pipe: that ends the server with one line on stderr, not a traceback."""
    try:
        await server.run_stdio_async()
    except* BrokenPipeError:
        # Python flushes stdout once more at exit; pointed at /dev/null that flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        print(
            f"{server.name}: the client that started this server is gone (its end of stdout closed); exiting",
            file=sys.stderr,
            flush=True,
        )


def configure_logging(level: str = "INFO") -> None:
    """Structured-enough logs on stderr: stdout belongs to JSON-RPC under stdio."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def run(
    server: MCPServer[Any],
    *,
    http: HttpOptions | None = None,
    status: ServerStatus | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Blocking entry point for a server's ``__main__``: stdio unless ``http`` is given.

    Over HTTP the port is bound before anything else starts, so a port in use is one
    :class:`HostingError` naming it; ``announce`` receives the URL once the server listens.
    """
    if http is None:
        anyio.run(serve_stdio, server)
        return
    http.check()
    try:
        sock = listen(http.host, http.port)
    except ListenError as exc:
        raise HostingError(exc.advice("--http HOST:PORT")) from None
    anyio.run(_serve_until_signalled, server, http, status, sock, announce)


async def _serve_until_signalled(
    server: MCPServer[Any],
    http: HttpOptions,
    status: ServerStatus | None,
    sock: socket.socket,
    announce: Callable[[str], None] | None,
) -> None:
    """SIGTERM or SIGINT ends the server gracefully (requests in flight finish), exit status 0."""

    async def ready(host: str, port: int) -> None:
        if announce is not None:
            announce(mcp_url(host, port))

    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        await serve_http(server, http, status=status, on_ready=ready, sock=sock)


def _read_secret_file(path: Path) -> str:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise HostingError(f"{path} is readable by other users (mode {mode:o}); run `chmod 600 {path}`")
    return path.read_text().strip()


def default_token_path(name: str, env: Mapping[str, str]) -> Path:
    """Where the bearer token of server ``name`` is generated when none is configured."""
    state = Path(env.get("NEXO_STATE_DIR") or DEFAULT_STATE_DIR).expanduser()
    return state / GENERATED_TOKENS_DIR / f"{name.rpartition('.')[2]}.token"


def generated_token(path: Path) -> str:
    """The token kept in ``path``, created (0600, 32 random bytes) when the file does not exist."""
    if not path.exists():
        try:
            create_private_file(path, (secrets.token_urlsafe(32) + "\n").encode())
        except OSError as exc:
            raise HostingError(
                f"cannot write a bearer token to {path}: {exc.strerror or exc}; set NEXO_SERVER_TOKEN, "
                "or NEXO_SERVER_TOKEN_FILE to a file this user can write"
            ) from exc
    return _read_secret_file(path)


@dataclass(frozen=True, slots=True)
class TokenSource:
    """Where an HTTP server's bearer token came from, for the line printed at start."""

    kind: Literal["env", "file", "generated"]
    path: Path | None = None

    def describe(self) -> str:
        if self.kind == "env":
            return "bearer token from NEXO_SERVER_TOKEN"
        if self.kind == "file":
            return f"bearer token in {self.path}"
        return f"bearer token generated into {self.path} (0600): clients send it as `Authorization: Bearer`"


def http_options_from_env(bind: str, env: Mapping[str, str], name: str = "server") -> HttpOptions:
    """``--http HOST:PORT`` plus ``NEXO_SERVER_TOKEN`` / ``NEXO_SERVER_TOKEN_FILE`` and the allowlists.

    Tokens never come from the command line, where any local user could read them with ``ps``.
    Without either variable a token is generated once into ``<NEXO_STATE_DIR>/http-tokens/`` (see
    :func:`token_source`); a token file that does not exist yet is created the same way.
    """
    host, port = parse_bind(bind)
    token = env.get("NEXO_SERVER_TOKEN") or None
    if token is None:
        token = generated_token(token_source(env, name).path or default_token_path(name, env))

    def listed(name: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())

    options = HttpOptions(
        host=host,
        port=port,
        token=token,
        allowed_hosts=listed("NEXO_SERVER_ALLOWED_HOSTS"),
        allowed_origins=listed("NEXO_SERVER_ALLOWED_ORIGINS"),
    )
    options.check()
    return options


def token_source(env: Mapping[str, str], name: str) -> TokenSource:
    if env.get("NEXO_SERVER_TOKEN"):
        return TokenSource("env")
    configured = env.get("NEXO_SERVER_TOKEN_FILE")
    if configured:
        return TokenSource("file", Path(configured).expanduser())
    return TokenSource("generated", default_token_path(name, env))


def startup_failure(exc: BaseException) -> HostingError | None:
    """The :class:`HostingError` behind a failed start, however deep in exception groups it sits."""
    if isinstance(exc, HostingError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = startup_failure(inner)
            if found is not None:
                return found
    return None


def server_main(
    name: str,
    build: Callable[[], MCPServer[Any]],
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """The whole ``__main__`` of a server: ``python -m PACKAGE [--http HOST:PORT]``."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run the {name} MCP server.")
    parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio")
    parser.add_argument(
        "--log-level", default=None, help="DEBUG, INFO, WARNING (default from NEXO_LOG_LEVEL)"
    )
    args = parser.parse_args(argv)
    environ = os.environ if env is None else env
    try:
        options = http_options_from_env(args.http, environ, name) if args.http else None
        server = build()
    except Exception as exc:  # noqa: BLE001 -- the process boundary: report and exit 1
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    configure_logging(args.log_level or environ.get("NEXO_LOG_LEVEL", "WARNING"))
    source = token_source(environ, name)

    def announce(url: str) -> None:
        print(f"{name}: serving MCP over HTTP at {url} ({source.describe()})", file=sys.stderr, flush=True)

    try:
        run(server, http=options, announce=announce)
    except (HostingError, BaseExceptionGroup) as exc:
        failure = startup_failure(exc)
        if failure is None:
            raise
        print(f"{name}: {failure}", file=sys.stderr)
        return 1
    return 0
