"""Supervising a server over Streamable HTTP, in process: a real server, the real client transport.

What a deployment does to an HTTP server (stops it, restarts it, hands the orchestrator the wrong
token) is that server's state: the orchestrator keeps pulling, reconnects fast, and says why.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from orchestrator.config.loading import load
from orchestrator.mesh import HttpServerConfig, ServerConnection, SupervisionConfig
from orchestrator.mesh.events import pull_forever
from shared.db import Database
from shared.events import EVENTS_MIGRATIONS, EventLog, StoredEvent
from shared.hosting.listener import listen
from shared.hosting.options import HttpOptions
from shared.hosting.serve import serve_http
from shared.protocol.events import Event, EventsExtension
from shared.serverkit import NexoServer

pytestmark = pytest.mark.anyio

TOKEN = "the-servers-token"
FAST = SupervisionConfig(initial_backoff_s=0.05, http_max_backoff_s=0.2, failure_threshold=2)


class ErringOnce(EventLog):
    """Answers the first pull with an error, as a server that is shutting down answers the one in flight."""

    refused = 0

    async def pull(self, **kwargs: Any) -> list[StoredEvent]:
        if not self.refused:
            self.refused += 1
            raise MCPError(types.INTERNAL_ERROR, "shutting down")
        return await super().pull(**kwargs)


def events_server(log: EventLog) -> NexoServer[Any]:
    return NexoServer("probe", instructions="Events for tests.", extensions=[EventsExtension(lambda _: log)])


@asynccontextmanager
async def serving(server: NexoServer[Any], port: int = 0) -> AsyncIterator[str]:
    """``server`` over HTTP until the block ends; leaving it is the graceful stop SIGTERM does."""
    sock = listen("127.0.0.1", port)
    bound = sock.getsockname()[1]
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(serve_http, server, HttpOptions(port=bound, token=TOKEN), sock=sock))
        yield f"http://127.0.0.1:{bound}/mcp"
        tg.cancel_scope.cancel()


def connection(
    url: str, token: str | None = TOKEN, supervision: SupervisionConfig = FAST
) -> ServerConnection:
    return ServerConnection("probe", HttpServerConfig(transport="http", url=url, token=token), supervision)


class Lines(logging.Handler):
    """Log records of the mesh as they come, so a test can wait for the n-th of a kind."""

    def __init__(self, needle: str, count: int) -> None:
        super().__init__()
        self.needle, self.count, self.seen = needle, count, 0
        self.reached = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.seen += 1
            if self.seen >= self.count:
                self.reached.set()


@asynccontextmanager
async def watching(needle: str, count: int) -> AsyncIterator[Lines]:
    lines = Lines(needle, count)
    logger = logging.getLogger("nexo.mesh")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)


async def test_a_pull_answered_with_an_error_is_pulled_again_and_the_event_arrives(tmp_path: Path) -> None:
    received: list[str] = []
    arrived = anyio.Event()

    async def handle(event: Event) -> None:
        received.append(event.dedupe_key)
        arrived.set()

    async with Database.open(tmp_path / "events.db", EVENTS_MIGRATIONS) as db:
        log = ErringOnce(db)
        async with serving(events_server(log)) as url, anyio.create_task_group() as tg:
            probe = connection(url)
            tg.start_soon(probe.run)
            tg.start_soon(partial(pull_forever, probe, handle, limit=10, label="pump probe"))
            await log.append("message", "k1", {})
            with anyio.fail_after(10):
                await arrived.wait()
            tg.cancel_scope.cancel()
    assert (received, log.refused) == (["k1"], 1)


async def test_an_http_server_down_past_the_failure_threshold_is_connected_as_soon_as_it_is_back(
    tmp_path: Path,
) -> None:
    async with Database.open(tmp_path / "events.db", EVENTS_MIGRATIONS) as db:
        sock = listen("127.0.0.1", 0)
        port = sock.getsockname()[1]
        sock.close()
        probe = connection(f"http://127.0.0.1:{port}/mcp")
        async with (
            anyio.create_task_group() as tg,
            watching("next connect in", 2 * FAST.failure_threshold) as lines,
        ):
            tg.start_soon(probe.run)
            with anyio.fail_after(10):
                await lines.reached.wait()
            snapshot = probe.snapshot()
            async with serving(events_server(EventLog(db)), port):
                with anyio.fail_after(2):
                    await probe.wait_ready(timeout=2)
                ready = probe.snapshot()
                tg.cancel_scope.cancel()
    assert (snapshot.state, snapshot.breaker) == ("backoff", "closed")
    assert snapshot.next_try_in_s is not None
    assert 0 <= snapshot.next_try_in_s <= FAST.http_max_backoff_s
    assert (ready.state, ready.last_error, ready.next_try_in_s) == ("ready", None, None)


async def test_a_refused_token_is_reported_with_where_nexo_read_it(tmp_path: Path) -> None:
    token_file = tmp_path / "probe.token"
    token_file.write_text("not-the-servers-token\n")
    token_file.chmod(0o600)
    async with (
        Database.open(tmp_path / "events.db", EVENTS_MIGRATIONS) as db,
        serving(events_server(EventLog(db))) as url,
    ):
        config_file = tmp_path / "agents.yaml"
        config_file.write_text(
            "servers:\n"
            f"  probe: {{transport: http, url: '{url}', token: '${{file:{token_file}}}'}}\n"
            "  bare: {transport: http, url: '" + url + "'}\n"
            "llm: {providers: {fake: {kind: openai_compat, base_url: 'http://127.0.0.1:9/v1', "
            "model: m}}}\n"
            "agents: [{id: nexo, model: {provider: fake}, channels: []}]\n"
        )
        config = load(config_file, env={})
        wrong = ServerConnection("probe", config.servers["probe"], FAST)
        missing = ServerConnection("bare", config.servers["bare"], FAST)
        wrong_error, missing_error = await wrong.probe(), await missing.probe()
    fix = (
        "Fix: put the server's token there and restart nexo (a nexo server names its token when it starts; "
        "see `nexo serve --help`)"
    )
    assert wrong_error == (
        "the server refused the bearer token (HTTP 401, invalid_token); nexo read it from the file "
        f"{token_file} (servers.probe.token in {config_file}). {fix}"
    )
    assert missing_error == (
        "the server requires a bearer token and nexo sent none (HTTP 401): nowhere: "
        f"servers.bare.token is not set in {config_file}. {fix}"
    )
    assert (wrong.refused, missing.refused) == (wrong_error, missing_error)
