"""``nexo memory ...``: search, list, forget, export, import, reindex, roll back and count memories.

Every subcommand talks MCP to the memory server named ``memory`` in the config (a stdio child
started for the command, or the HTTP service the config points at) through the control-plane
methods of ``shared.protocol.memory``; the orchestrator never imports the server's code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types

from orchestrator.child_env import child_env
from orchestrator.cli.common import EXIT_OK, EXIT_WARN, fail, load_config, print_json
from orchestrator.cli.direct import started_early
from orchestrator.cli.progress import ProgressBar
from orchestrator.cli.wording import for_person
from shared.protocol import memory_terms as terms
from shared.protocol.memory import admin, memory_md
from shared.protocol.memory.records import ImportRecord, MemoryRecord

if TYPE_CHECKING:
    from orchestrator.mesh.forkserver import ForkServer

R = TypeVar("R", bound=types.Result)

SERVER = "memory"
READY_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 120.0
IMPORT_BATCH = 100
PAGE = 100
PREVIEW_CHARS = 100
MISMATCH_ENV = {"NEXO_MEMORY_ALLOW_MODEL_MISMATCH": "true"}


class CommandFailed(Exception):
    """Reported as ``nexo: <message>`` with exit code 1."""


def command_memory(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    try:
        # Arguments and the import file are checked before a server is started for nothing.
        _check_arguments(args)
        if args.memory_command == "import":
            args.entries = read_import_file(Path(args.file))
        server = _server_config(config, MISMATCH_ENV if args.memory_command == "reindex" else {})
        with started_early(config, {SERVER: server}, child_env(config)) as fork_server:
            result: int = anyio.run(_dispatch, args, config, server, fork_server)
    except CommandFailed as exc:
        return fail(str(exc))
    return result


def _check_arguments(args: argparse.Namespace) -> None:
    limit = getattr(args, "limit", None)
    highest = {"search": terms.MAX_SEARCH_LIMIT, "history": terms.MAX_HISTORY}.get(args.memory_command)
    if limit is not None and highest is not None and not 1 <= limit <= highest:
        raise CommandFailed(f"--limit {limit} is out of range; use 1 to {highest}")
    if limit is not None and args.memory_command == "list" and limit < 0:
        raise CommandFailed(f"--limit {limit} is out of range; use 0 (all) or more")
    batch = getattr(args, "batch_size", 1)
    if not 1 <= batch <= terms.MAX_REINDEX_BATCH:
        raise CommandFailed(f"--batch-size {batch} is out of range; use 1 to {terms.MAX_REINDEX_BATCH}")


async def _dispatch(
    args: argparse.Namespace, config: Any, server: Any, fork_server: ForkServer | None
) -> int:
    from orchestrator.mesh import Mesh

    handlers = {
        "search": _search,
        "list": _list,
        "forget": _forget,
        "export": _export,
        "import": _import,
        "reindex": _reindex,
        "history": _history,
        "rollback": _rollback,
        "stats": _stats,
    }
    outcome: int | CommandFailed
    mesh = Mesh(
        {SERVER: server}, config.supervision, base_env=child_env(config), fork_server=fork_server or False
    )
    async with mesh:
        # Caught here and raised after the mesh closed, so it does not come out of its task group
        # wrapped in an exception group.
        try:
            connection = await _ready(mesh[SERVER], server.describe())
            outcome = await handlers[args.memory_command](_Server(connection), args, config)
        except CommandFailed as exc:
            outcome = exc
    if isinstance(outcome, CommandFailed):
        raise outcome
    return outcome


# -- connection ------------------------------------------------------------------------------------


class _Server:
    def __init__(self, connection: Any) -> None:
        self._connection = connection

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


# -- output ----------------------------------------------------------------------------------------


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def _line(record: MemoryRecord) -> str:
    text = " ".join(record.content.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    flags = " archived" if record.archived else ""
    tags = f"  #{' #'.join(record.tags)}" if record.tags else ""
    return (
        f"{record.id:>6}  {record.agent}  {_when(record.created_at)}  {record.kind}/{record.provenance}"
        f"{flags}  {text}{tags}"
    )


# -- subcommands -----------------------------------------------------------------------------------


def _default_agent(args: argparse.Namespace, config: Any) -> str:
    return str(args.agent or config.agent(None).id)


async def _search(server: _Server, args: argparse.Namespace, config: Any) -> int:
    params = admin.SearchParams(
        query=args.query,
        agent=_default_agent(args, config),
        mode=args.mode,
        limit=args.limit,
    )
    result = await server.call(admin.SearchRequest(params=params), admin.SearchResult)
    if args.json:
        print_json({"mode": result.mode, "memories": [m.model_dump(mode="json") for m in result.memories]})
        return EXIT_OK
    if result.mode != args.mode:
        print(f"note: {args.mode} search was unavailable; these are {result.mode} results", file=sys.stderr)
    for record in result.memories:
        print(_line(record))
    if not result.memories:
        print("no memories match", file=sys.stderr)
    return EXIT_OK


async def _list(server: _Server, args: argparse.Namespace, config: Any) -> int:
    records: list[MemoryRecord] = []
    wanted = args.limit or None
    params = admin.ListParams(agent=args.agent, kind=args.kind, limit=min(PAGE, wanted or PAGE))
    while True:
        page = await server.call(admin.ListRequest(params=params), admin.ListResult)
        records.extend(page.memories)
        if not args.json:
            print("\n".join(_line(record) for record in page.memories), end="\n" if page.memories else "")
        if page.next_after_id is None or (wanted is not None and len(records) >= wanted):
            break
        left = PAGE if wanted is None else min(PAGE, wanted - len(records))
        params = params.model_copy(update={"after_id": page.next_after_id, "limit": left})
    more = page.remaining if page.next_after_id is not None else 0
    if args.json:
        print_json([record.model_dump(mode="json") for record in records])
    elif not records:
        print("no memories", file=sys.stderr)
    if more:
        print(
            f"{more} more not shown; raise --limit (0 shows all) or use `nexo memory export`", file=sys.stderr
        )
    return EXIT_OK


async def _forget(server: _Server, args: argparse.Namespace, config: Any) -> int:
    result = await server.call(admin.ForgetRequest(params=admin.ForgetParams(id=args.id)), admin.ForgetResult)
    if args.json:
        print_json(result.forgotten.model_dump(mode="json"))
    else:
        print(f"forgot {_line(result.forgotten)}")
    return EXIT_OK


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


async def _history(server: _Server, args: argparse.Namespace, config: Any) -> int:
    agent = _default_agent(args, config)
    result = await server.call(
        memory_md.HistoryRequest(params=memory_md.HistoryParams(agent=agent, limit=args.limit)),
        memory_md.HistoryResult,
    )
    if args.json:
        print_json({"agent": agent, **result.model_dump(mode="json", exclude={"meta"})})
        return EXIT_OK
    for revision in result.revisions:
        print(f"{revision.rev[:12]}  {revision.when[:19].replace('T', ' ')}  {revision.message}")
    if not result.revisions:
        print(f"MEMORY.md of agent {agent} has no revisions yet", file=sys.stderr)
    return EXIT_OK


async def _rollback(server: _Server, args: argparse.Namespace, config: Any) -> int:
    agent = _default_agent(args, config)
    result = await server.call(
        memory_md.RollbackRequest(params=memory_md.RollbackParams(agent=agent, rev=args.rev)),
        memory_md.RollbackResult,
    )
    if args.json:
        print_json({"agent": agent, "restored_from": args.rev, "rev": result.rev, "content": result.content})
    print(
        f"MEMORY.md of agent {agent} restored from {args.rev} as revision {result.rev[:12]}", file=sys.stderr
    )
    return EXIT_OK


async def _stats(server: _Server, args: argparse.Namespace, config: Any) -> int:
    from orchestrator.cli.memory_figures import figures

    result = await server.call(admin.StatsRequest(params=admin.StatsParams()), admin.StatsResult)
    measured = figures(
        (await server.call(admin.MetricsRequest(params=admin.MetricsParams()), admin.MetricsResult)).text
    )
    if args.json:
        print_json({**result.model_dump(mode="json", exclude={"meta"}), "metrics": measured.as_json()})
        return EXIT_OK
    embedder = result.embedder
    groups = {"per agent": result.by_agent, "per kind": result.by_kind, "per source": result.by_provenance}
    print(f"memories      {result.total} ({result.archived} archived)")
    for title, counts in groups.items():
        print(f"{title:<13} " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "-"))
    print(f"sessions      {result.sessions} ({result.transcript_entries} transcript entries)")
    print(f"vectors       {result.vectors}")
    print(f"database      {result.db_bytes / 1_048_576:.1f} MiB")
    print(f"embedder      {embedder.model_id} ({embedder.dim} dims)")
    print("\n".join(measured.lines()))
    if not embedder.reindex_needed:
        return EXIT_OK
    print(f"              the index holds {embedder.recorded_model_id} vectors: run `nexo memory reindex`")
    return EXIT_WARN
