"""``nexo memory search | list | forget | history | rollback | stats``, written once over plain JSON
results, and asked of the running ``nexo run`` when one runs.

With a daemon up, those subcommands send their control-plane requests through its control socket
(``op: operator``): its memory server answers them, with its embedding model already loaded, and the
command imports neither the MCP SDK nor pydantic, validates no config and starts no server. Without
one, :mod:`orchestrator.cli.memory` starts a memory server for the command, as before, and hands its
answers, dumped to the same JSON, to the same functions here. ``export``, ``import`` and ``reindex``
(long runs with a progress bar) always run on a server of their own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio

from orchestrator.cli.common import EXIT_OK, EXIT_WARN, fail, print_json
from orchestrator.cli.locate import state_dir
from orchestrator.cli.running import ask_operator
from orchestrator.sockets import control_path
from shared.protocol import memory_terms as terms

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""One control-plane request (method, params) to the memory server; its result as JSON."""

SEARCH, LIST, FORGET = terms.SEARCH_METHOD, terms.LIST_METHOD, terms.FORGET_METHOD
HISTORY, ROLLBACK = terms.HISTORY_METHOD, terms.ROLLBACK_METHOD
STATS, METRICS = terms.STATS_METHOD, terms.METRICS_METHOD
PAGE = 100
PREVIEW_CHARS = 100
MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""A page of memories may hold large ones (``NEXO_MEMORY_MAX_CONTENT_BYTES`` goes up to 1 MiB)."""


class CommandFailed(Exception):
    """Reported as ``nexo: <message>`` with exit code 1."""


def command_memory(args: argparse.Namespace) -> int:
    try:
        check_arguments(args)
        if args.memory_command in THROUGH_DAEMON:
            outcome = anyio.run(_through_daemon, args)
            if outcome is not None:
                return outcome
    except CommandFailed as exc:
        return fail(str(exc))
    from orchestrator.cli.memory import command_memory as on_a_server_of_its_own

    return on_a_server_of_its_own(args)


def check_arguments(args: argparse.Namespace) -> None:
    limit = getattr(args, "limit", None)
    highest = {"search": terms.MAX_SEARCH_LIMIT, "history": terms.MAX_HISTORY}.get(args.memory_command)
    if limit is not None and highest is not None and not 1 <= limit <= highest:
        raise CommandFailed(f"--limit {limit} is out of range; use 1 to {highest}")
    if limit is not None and args.memory_command == "list" and limit < 0:
        raise CommandFailed(f"--limit {limit} is out of range; use 0 (all) or more")
    batch = getattr(args, "batch_size", 1)
    if not 1 <= batch <= terms.MAX_REINDEX_BATCH:
        raise CommandFailed(f"--batch-size {batch} is out of range; use 1 to {terms.MAX_REINDEX_BATCH}")


class _NoDaemon(Exception):
    """No daemon answered the first request: the command starts a memory server of its own."""


async def _through_daemon(args: argparse.Namespace) -> int | None:
    """The subcommand answered by the running daemon; None when none runs there."""
    path = control_path(state_dir(args.config))
    if not path.exists():
        return None
    agent: list[str] = []
    answered: list[str] = []

    async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await ask_operator(path, method, params, max_bytes=MAX_ANSWER_BYTES)
        if answer is None:
            if answered:
                raise CommandFailed("the running nexo went away; see `nexo status`")
            raise _NoDaemon  # a socket left behind by a daemon that is gone
        answered.append(method)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise CommandFailed(str(answer.get("error", answer)))
        if isinstance(answer.get("agent"), str):
            agent[:] = [answer["agent"]]
        return result

    try:
        return await run(args, call, lambda: agent[0] if agent else args.agent or "-")
    except _NoDaemon:
        return None


async def run(args: argparse.Namespace, call: Call, agent: Callable[[], str]) -> int:
    """Run one of :data:`THROUGH_DAEMON`; ``agent()`` is the agent the request was for (known once
    the answer is in: the daemon fills in its default agent)."""
    return await _HANDLERS[args.memory_command](call, args, agent)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def line(record: Mapping[str, Any]) -> str:
    text = " ".join(str(record["content"]).split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    flags = " archived" if record["archived"] else ""
    tags = f"  #{' #'.join(record['tags'])}" if record["tags"] else ""
    return (
        f"{record['id']:>6}  {record['agent']}  {_when(record['created_at'])}  "
        f"{record['kind']}/{record['provenance']}{flags}  {text}{tags}"
    )


def _agent_param(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.agent is None else {"agent": args.agent}


async def _search(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    params = {"query": args.query, "mode": args.mode, "limit": args.limit, **_agent_param(args)}
    result = await call(SEARCH, params)
    if args.json:
        print_json({"mode": result["mode"], "memories": result["memories"]})
        return EXIT_OK
    if result["mode"] != args.mode:
        print(
            f"note: {args.mode} search was unavailable; these are {result['mode']} results", file=sys.stderr
        )
    for record in result["memories"]:
        print(line(record))
    if not result["memories"]:
        print("no memories match", file=sys.stderr)
    return EXIT_OK


async def _list(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    records: list[dict[str, Any]] = []
    wanted = args.limit or None
    params: dict[str, Any] = {"limit": min(PAGE, wanted or PAGE), **_agent_param(args)}
    if args.kind is not None:
        params["kind"] = args.kind
    while True:
        page = await call(LIST, params)
        records.extend(page["memories"])
        if not args.json:
            print(
                "\n".join(line(record) for record in page["memories"]), end="\n" if page["memories"] else ""
            )
        if page["next_after_id"] is None or (wanted is not None and len(records) >= wanted):
            break
        left = PAGE if wanted is None else min(PAGE, wanted - len(records))
        params = {**params, "after_id": page["next_after_id"], "limit": left}
    more = page["remaining"] if page["next_after_id"] is not None else 0
    if args.json:
        print_json(records)
    elif not records:
        print("no memories", file=sys.stderr)
    if more:
        print(
            f"{more} more not shown; raise --limit (0 shows all) or use `nexo memory export`", file=sys.stderr
        )
    return EXIT_OK


async def _forget(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    result = await call(FORGET, {"id": args.id})
    if args.json:
        print_json(result["forgotten"])
    else:
        print(f"forgot {line(result['forgotten'])}")
    return EXIT_OK


async def _history(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    result = await call(HISTORY, {"limit": args.limit, **_agent_param(args)})
    if args.json:
        print_json({"agent": agent(), **result})
        return EXIT_OK
    for revision in result["revisions"]:
        print(f"{revision['rev'][:12]}  {revision['when'][:19].replace('T', ' ')}  {revision['message']}")
    if not result["revisions"]:
        print(f"MEMORY.md of agent {agent()} has no revisions yet", file=sys.stderr)
    return EXIT_OK


async def _rollback(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    result = await call(ROLLBACK, {"rev": args.rev, **_agent_param(args)})
    if args.json:
        restored = {"restored_from": args.rev, "rev": result["rev"], "content": result["content"]}
        print_json({"agent": agent(), **restored})
    print(
        f"MEMORY.md of agent {agent()} restored from {args.rev} as revision {result['rev'][:12]}",
        file=sys.stderr,
    )
    return EXIT_OK


async def _stats(call: Call, args: argparse.Namespace, agent: Callable[[], str]) -> int:
    from orchestrator.cli.memory_figures import figures

    result = await call(STATS, {})
    measured = figures((await call(METRICS, {}))["text"])
    if args.json:
        print_json({**result, "metrics": measured.as_json()})
        return EXIT_OK
    embedder = result["embedder"]
    groups = {
        "per agent": result["by_agent"],
        "per kind": result["by_kind"],
        "per source": result["by_provenance"],
    }
    print(f"memories      {result['total']} ({result['archived']} archived)")
    for title, counts in groups.items():
        print(f"{title:<13} " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "-"))
    print(f"sessions      {result['sessions']} ({result['transcript_entries']} transcript entries)")
    print(f"vectors       {result['vectors']}")
    print(f"database      {result['db_bytes'] / 1_048_576:.1f} MiB")
    print(f"embedder      {embedder['model_id']} ({embedder['dim']} dims)")
    print("\n".join(measured.lines()))
    if not embedder["reindex_needed"]:
        return EXIT_OK
    print(f"              the index holds {embedder['recorded_model_id']} vectors: run `nexo memory reindex`")
    return EXIT_WARN


_HANDLERS: dict[str, Callable[[Call, argparse.Namespace, Callable[[], str]], Awaitable[int]]] = {
    "search": _search,
    "list": _list,
    "forget": _forget,
    "history": _history,
    "rollback": _rollback,
    "stats": _stats,
}
THROUGH_DAEMON = frozenset(_HANDLERS)
"""The subcommands the running daemon answers (the others always run on a server of their own)."""
