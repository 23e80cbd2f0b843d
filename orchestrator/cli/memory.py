"""``nexo memory ...`` on a memory server started for the command: every subcommand when no daemon
runs (``orchestrator.cli.memory_view`` has asked it first), and ``export``, ``import`` and
``reindex`` always.

Each talks MCP to the memory server named ``memory`` in the config (a stdio child started for the
command, or the HTTP service the config points at) through the control-plane methods of
``shared.protocol.memory``; the orchestrator never imports the server's code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types

from orchestrator.child_env import child_env
from orchestrator.cli.common import EXIT_OK, EXIT_WARN, fail, load_config, print_json
from orchestrator.cli.direct import started_early
from orchestrator.cli.memory_view import THROUGH_DAEMON, CommandFailed, run
from orchestrator.cli.progress import ProgressBar
from orchestrator.cli.wording import for_person
from shared.protocol.memory import admin
from shared.protocol.memory.records import ImportRecord

if TYPE_CHECKING:
    from orchestrator.mesh.forkserver import ForkServer

R = TypeVar("R", bound=types.Result)

SERVER = "memory"
READY_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 120.0
IMPORT_BATCH = 100
PAGE = 100
MISMATCH_ENV = {"NEXO_MEMORY_ALLOW_MODEL_MISMATCH": "true"}


def command_memory(args: argparse.Namespace) -> int:
    """The subcommand on a memory server started for it (``memory_view.command_memory`` has checked
    the arguments and found no running daemon to ask, or the subcommand is a long run of its own)."""
    config = load_config(args.config)
    try:
        # The import file is checked before a server is started for nothing.
        if args.memory_command == "import":
            args.entries = read_import_file(Path(args.file))
        server = _server_config(config, MISMATCH_ENV if args.memory_command == "reindex" else {})
        with started_early(config, {SERVER: server}, child_env(config)) as fork_server:
            result: int = anyio.run(_dispatch, args, config, server, fork_server)
    except CommandFailed as exc:
        return fail(str(exc))
    return result


async def _dispatch(
    args: argparse.Namespace, config: Any, server: Any, fork_server: ForkServer | None
) -> int:
    from orchestrator.mesh import Mesh

    handlers = {"export": _export, "import": _import, "reindex": _reindex}
    outcome: int | CommandFailed
    mesh = Mesh(
        {SERVER: server}, config.supervision, base_env=child_env(config), fork_server=fork_server or False
    )
    async with mesh:
        # Caught here and raised after the mesh closed, so it does not come out of its task group
        # wrapped in an exception group.
        try:
            connection = _Server(await _ready(mesh[SERVER], server.describe()))
            if args.memory_command in THROUGH_DAEMON:
                outcome = await run(args, partial(connection.call_json, config), connection.agent)
            else:
                outcome = await handlers[args.memory_command](connection, args, config)
        except CommandFailed as exc:
            outcome = exc
    if isinstance(outcome, CommandFailed):
        raise outcome
    return outcome


# -- connection ------------------------------------------------------------------------------------


class _Server:
    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._agent = "-"

    def agent(self) -> str:
        """The agent the last request was about (the config's first when the command named none)."""
        return self._agent

    async def call_json(self, config: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The request as the running daemon relays it (its default agent filled in the same way),
        the result dumped to JSON by field name."""
        from pydantic import ValidationError

        from orchestrator.relay import RELAYED, with_default_agent

        params = with_default_agent(config, method, params)
        self._agent = str(params.get("agent") or "-")
        request_model, result_model = RELAYED[method]
        try:
            request = request_model.model_validate({"method": method, "params": params})
        except ValidationError as exc:
            raise CommandFailed(f"invalid request {method}: {exc.errors(include_url=False)}") from exc
        result = await self.call(request, result_model)
        return result.model_dump(mode="json", exclude={"meta"})

    async def call(self, request: types.Request[Any, Any], result_type: type[R]) -> R:
        from mcp import MCPError

        from orchestrator.mesh import ServerUnavailable

        try:
            result: R = await self._connection.request(request, result_type, timeout=CALL_TIMEOUT_S)
            return result
        except MCPError as exc:
            raise CommandFailed(exc.message) from exc
        except ServerUnavailable as exc:
            raise CommandFailed(str(exc)) from exc


def _server_config(config: Any, extra_env: dict[str, str]) -> Any:
    from orchestrator.mesh import StdioServerConfig

    server = config.servers.get(SERVER)
    if server is None:
        raise CommandFailed(
            f"the config has no server named {SERVER!r}; add one under servers: "
            "(transport: stdio, command: python, args: [-m, servers.memory])"
        )
    if extra_env and isinstance(server, StdioServerConfig):
        server = server.model_copy(update={"env": {**server.env, **extra_env}})
    return server


async def _ready(connection: Any, target: str) -> Any:
    # A server that exits at startup (bad settings, a changed model) prints why on stderr and the
    # mesh records a failed connect; the mesh has no event for that, so poll the connection's state
    # and stop at the first failure instead of retrying until the deadline.
    with anyio.move_on_after(READY_TIMEOUT_S):
        while connection.client is None and connection.last_error is None:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    if connection.client is None:
        raise CommandFailed(
            f"the memory server ({target}) did not start: "
            f"{connection.last_error or 'no answer within the timeout'}; its own message is above"
        )
    return connection


# -- subcommands -----------------------------------------------------------------------------------


async def _export_pages(
    server: _Server, params: admin.ExportParams, write: Callable[[str], Awaitable[object]], bar: bool
) -> int:
    written = 0
    progress: ProgressBar | None = None
    while True:
        page = await server.call(admin.ExportRequest(params=params), admin.ExportResult)
        await write("".join(record.model_dump_json() + "\n" for record in page.records))
        written += len(page.records)
        if bar:
            progress = progress or ProgressBar("exporting", page.total)
            progress.update(written)
        if page.next_after_id is None:
            break
        params = params.model_copy(update={"after_id": page.next_after_id})
    if progress is not None:
        progress.close()
    return written


async def _export(server: _Server, args: argparse.Namespace, config: Any) -> int:
    params = admin.ExportParams(agent=args.agent, limit=PAGE)
    if args.output is None:

        async def to_stdout(text: str) -> None:
            sys.stdout.write(text)

        written = await _export_pages(server, params, to_stdout, bar=False)
    else:
        async with await anyio.open_file(args.output, "w", encoding="utf-8") as out:
            written = await _export_pages(server, params, out.write, bar=True)
    print(f"exported {written} memories", file=sys.stderr)
    return EXIT_OK


def _read_records(path: Path) -> Iterator[tuple[int, ImportRecord | str]]:
    """(line number, record or why the line is not one) for every non-blank line."""
    from pydantic import ValidationError

    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, ImportRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError) as exc:
                yield number, " ".join(str(exc).split())


def read_import_file(path: Path) -> list[tuple[int, ImportRecord | str]]:
    try:
        return list(_read_records(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandFailed(f"cannot read {path}: {exc}") from exc


async def _import(server: _Server, args: argparse.Namespace, config: Any) -> int:
    entries: list[tuple[int, ImportRecord | str]] = args.entries
    problems = [f"line {n}: {entry}" for n, entry in entries if isinstance(entry, str)]
    records = [(n, entry) for n, entry in entries if not isinstance(entry, str)]
    bar = ProgressBar("importing", len(entries), quiet=args.json)
    imported = refreshed = 0
    done = len(problems)
    for start in range(0, len(records), IMPORT_BATCH):
        batch = records[start : start + IMPORT_BATCH]
        result = await server.call(
            admin.ImportRequest(params=admin.ImportParams(records=[r for _, r in batch])), admin.ImportResult
        )
        imported += result.imported
        refreshed += result.refreshed
        problems.extend(f"line {batch[p.index][0]}: {for_person(p.error)}" for p in result.rejected)
        done += len(batch)
        bar.update(done)
    bar.close()
    if args.json:
        print_json({"imported": imported, "refreshed": refreshed, "rejected": problems})
    for problem in problems:
        print(f"rejected {problem}", file=sys.stderr)
    print(
        f"imported {imported}, refreshed {refreshed} already known, rejected {len(problems)}", file=sys.stderr
    )
    return EXIT_WARN if problems else EXIT_OK


async def _reindex(server: _Server, args: argparse.Namespace, config: Any) -> int:
    bar: ProgressBar | None = None
    while True:
        step = await server.call(
            admin.ReindexRequest(params=admin.ReindexParams(batch_size=args.batch_size)), admin.ReindexResult
        )
        bar = bar or ProgressBar("reindexing", step.total, unit="memories", quiet=args.json)
        bar.update(step.done)
        if step.finished:
            break
    bar.close()
    if args.json:
        print_json({"reindexed": step.done, "model_id": step.model_id, "dim": step.dim})
    print(f"reindexed {step.done} memories with {step.model_id} ({step.dim} dims)", file=sys.stderr)
    return EXIT_OK
