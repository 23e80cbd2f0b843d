"""``nexo audit tail | verify``: read and check the audit ledger.

With ``nexo run`` up, ``tail`` asks the daemon's own audit server through the control socket.
Otherwise, and ``verify`` always (a walk of a large ledger outlasts the socket's wait), they talk to
the audit server directly (the config's ``servers.audit`` entry: a child process of this command,
or an HTTP service), so they work while ``nexo run`` is down.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, fail, load_config, print_json
from orchestrator.cli.direct import Action, run_with_server, with_server

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection

AUDIT_SERVER = "audit"
READ_TIMEOUT_S = 30.0
VERIFY_TIMEOUT_S = 600.0
"""A full walk of a large ledger recomputes every hash."""
HEAD_RE = re.compile(r"^(\d+):([0-9a-fA-F]+)$")
HASH_HEX_CHARS = 64
AUDIT_CONFIG_HINT = (
    "add it under servers: in the config, e.g. "
    "audit: {transport: stdio, command: python, args: [-m, servers.audit]}"
)


READ_ONLY = {"NEXO_AUDIT_TRIM_INTERVAL_S": "0"}
"""A read command must not trim: retention runs in the daemon's own audit server."""


async def with_audit(config: Any, action: Action) -> int:
    """Connect to the audit server named in ``config`` and run ``action``; errors become exit 1."""
    return await with_server(config, AUDIT_SERVER, action, hint=AUDIT_CONFIG_HINT, env=READ_ONLY)


def run_with_audit(args: argparse.Namespace, action: Action) -> int:
    config = load_config(args.config)
    return run_with_server(config, AUDIT_SERVER, action, hint=AUDIT_CONFIG_HINT, env=READ_ONLY)


# -- rendering -----------------------------------------------------------------------------------


def summarize(kind: str, body: dict[str, Any]) -> str:
    """One line about an entry's body, for entries whose subject is empty."""
    if kind == "turn":
        return f"turn {body.get('index')} {body.get('outcome')}: {body.get('decision', '')}".rstrip(": ")
    if kind == "tool_call":
        return f"{body.get('tool')} {body.get('outcome')} in {body.get('duration_ms')} ms"
    if kind == "goal":
        return f"{body.get('previous') or 'new'} -> {body.get('status')} {body.get('reason', '')}".rstrip()
    pairs = (f"{key}={value}" for key, value in sorted(body.items()) if value not in (None, "", []))
    return " ".join(pairs)


def entry_line(entry: Mapping[str, Any]) -> str:
    """One ledger entry (as JSON: from the server's answer or the running daemon's) on one line."""
    kind = str(entry["kind"])
    text = " ".join(str(entry.get("subject") or summarize(kind, entry.get("body") or {})).split())
    time = str(entry["at"])[:19].replace("T", " ")
    goal = entry.get("goal_id") or "-"
    return f"{entry['seq']:>7}  {time}  {kind:<18} {entry['source']:<20} {goal:<16} {text}"


# -- commands ------------------------------------------------------------------------------------


def parse_head(value: str) -> tuple[int, str]:
    """``SEQ:HASH`` with the whole 64-character hash: a shorter prefix would let a rewritten ledger
    pass with a few billion tries, which is exactly what a recorded head is meant to rule out."""
    match = HEAD_RE.match(value.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"expected SEQ:HASH as the line `head SEQ:HASH` of `nexo audit verify` prints it "
            f"(the whole {HASH_HEX_CHARS}-character hash); got {value!r}"
        )
    digest = match.group(2).lower()
    if len(digest) != HASH_HEX_CHARS:
        raise argparse.ArgumentTypeError(
            f"the hash in {value!r} has {len(digest)} hex characters; give all {HASH_HEX_CHARS} as "
            "`nexo audit verify` prints them (a shortened hash cannot prove the ledger was not rewritten)"
        )
    return int(match.group(1)), digest


def add_audit_parser(sub: Any) -> argparse.ArgumentParser:
    """``nexo audit ...`` on the top-level subparsers."""
    audit: argparse.ArgumentParser = sub.add_parser(
        "audit", help="read and verify the tamper-evident audit ledger"
    )
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")
    tail = audit_sub.add_parser("tail", help="the newest ledger entries, oldest first")
    tail.add_argument("--config", help="YAML config (default: $NEXO_CONFIG or the built-in defaults)")
    tail.add_argument("--goal", help="only this goal's entries")
    tail.add_argument("--source", help="only entries from this source, e.g. channel:console, cron, cli")
    tail.add_argument("--kind", help="only this kind, e.g. turn, tool_call, approval_answered, goal")
    tail.add_argument("-n", type=int, default=20, help="how many entries (default 20, at most 1000)")
    tail.add_argument("--json", action="store_true", help="print the entries as JSON")
    verify = audit_sub.add_parser(
        "verify", help="recompute the hash chain; exit 1 naming the first bad entry"
    )
    verify.add_argument("--config", help="YAML config (default: $NEXO_CONFIG or the built-in defaults)")
    verify.add_argument(
        "--expect-head",
        type=parse_head,
        metavar="SEQ:HASH",
        help="a head recorded earlier: also detects entries cut from the end or a rewritten chain",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    return audit


def tail_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``nexo audit tail`` arguments, found before any server is started."""
    from shared.protocol.audit.terms import ENTRY_KINDS, MAX_TAIL

    if args.kind is not None and args.kind not in ENTRY_KINDS:
        return f"unknown kind {args.kind!r}: use one of {', '.join(ENTRY_KINDS)}"
    if not 1 <= args.n <= MAX_TAIL:
        return f"-n must be between 1 and {MAX_TAIL}; got {args.n}"
    return None


def _tail_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"goal_id": args.goal, "source": args.source, "kind": args.kind, "limit": args.n}


def _tail(args: argparse.Namespace) -> Action:
    from shared.protocol.audit.methods import TailParams, TailRequest, TailResult

    async def action(audit: ServerConnection) -> int:
        request = TailRequest(params=TailParams.model_validate(_tail_params(args)))
        result = await audit.request(request, TailResult, timeout=READ_TIMEOUT_S)
        return _show_tail(args, [entry.model_dump(mode="json") for entry in result.entries])

    return action


def _tail_through_daemon(args: argparse.Namespace) -> int | None:
    """``nexo audit tail`` answered by the running daemon's own audit server (no config validated,
    no MCP client, no second server); None when no daemon runs."""
    from orchestrator.cli.running import through_daemon
    from shared.protocol.audit.terms import TAIL_METHOD

    return through_daemon(
        args.config,
        TAIL_METHOD,
        _tail_params(args),
        "audit",
        lambda result: _show_tail(args, result["entries"]),
    )


def _show_tail(args: argparse.Namespace, entries: list[dict[str, Any]]) -> int:
    """Print the entries (the same JSON from the daemon and from the server itself)."""
    if args.json:
        print_json(entries)
        return EXIT_OK
    if not entries:
        print("no matching entries")
    for entry in entries:
        print(entry_line(entry))
    return EXIT_OK


def _verify(args: argparse.Namespace) -> Action:
    from shared.protocol.audit.entries import Head
    from shared.protocol.audit.methods import VerifyParams, VerifyRequest, VerifyResult

    async def action(audit: ServerConnection) -> int:
        expected = (
            None if args.expect_head is None else Head(seq=args.expect_head[0], hash=args.expect_head[1])
        )
        request = VerifyRequest(params=VerifyParams(expected_head=expected))
        report = (await audit.request(request, VerifyResult, timeout=VERIFY_TIMEOUT_S)).report
        if args.json:
            print_json(report.model_dump(mode="json"))
        elif report.problem is None:
            print(
                f"audit ledger intact: {report.checked} entries checked, {report.removed} removed by "
                f"retention ({report.checkpoints} checkpoints)"
            )
            print(f"head {report.head.seq}:{report.head.hash}  (record it to detect truncation later)")
        else:
            problem = report.problem
            print(f"audit ledger BROKEN at entry {problem.seq} ({problem.kind}): {problem.detail}")
        return EXIT_OK if report.ok else EXIT_FAIL

    return action


def command_audit(args: argparse.Namespace) -> int:
    """Run ``nexo audit tail`` or ``nexo audit verify`` (``args.audit_command``)."""
    if args.audit_command == "tail":
        problem = tail_problem(args)
        if problem is not None:
            return fail(problem)
        shown = _tail_through_daemon(args)
        return shown if shown is not None else run_with_audit(args, _tail(args))
    return run_with_audit(args, _verify(args))
