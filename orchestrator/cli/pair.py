"""``nexo pair list | approve CODE | deny ID | revoke CHANNEL:SENDER | seed CHANNEL ACCOUNT SENDER...``.

Pairing changes only here, out of band, or by the operator's one-tap answer on their own channel:
no model-facing tool can change it. With ``nexo run`` up they ask its own pairing server through
its control socket; while it is down they start the pairing server themselves and talk to it.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import TYPE_CHECKING, Any

from orchestrator.cli.common import EXIT_OK, fail, load_config, print_json
from orchestrator.cli.direct import run_with_server
from shared.protocol import pairing_methods as m

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.mesh import ServerConnection

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"
TIMEOUT_S = 30.0
PAIRING_HINT = (
    "add it under servers: in the config, e.g. "
    "pairing: {transport: stdio, command: python, args: [-m, servers.pairing]}"
)


def add_pair_parser(sub: Any) -> None:
    pair = sub.add_parser("pair", help="who may reach the agent: paired senders, codes, revocations")
    pair_sub = pair.add_subparsers(dest="pair_command", required=True, metavar="SUBCOMMAND")
    listing = pair_sub.add_parser("list", help="paired senders, open requests and the lockout state")
    listing.add_argument("--channel", help="only this channel server")
    listing.add_argument("--all", action="store_true", help="also revoked pairings")
    approve = pair_sub.add_parser("approve", help="admit the sender who was given CODE")
    approve.add_argument("code", metavar="CODE", help="the 8-character code the sender received")
    approve.add_argument("--owner", action="store_true", help="pair as an owner (their answers approve)")
    deny = pair_sub.add_parser("deny", help="turn an open request down")
    deny.add_argument("pending_id", metavar="REQUEST", help="the request id `nexo pair list` shows")
    revoke = pair_sub.add_parser("revoke", help="remove a pairing")
    revoke.add_argument(
        "target", metavar="CHANNEL:SENDER", help="as `nexo pair list` shows it, e.g. telegram:123456789"
    )
    revoke.add_argument("--account", help="only this account of the channel (default: every account)")
    revoke.add_argument(
        "--scope", choices=("dm", "group"), default="dm", help="group: SENDER is a group chat (default dm)"
    )
    seed = pair_sub.add_parser("seed", help="pair senders (or group chats) directly")
    seed.add_argument("channel", metavar="CHANNEL", help="the channel server's name under servers:")
    seed.add_argument("account", metavar="ACCOUNT", help="the channel's account, usually `default`")
    seed.add_argument("senders", metavar="SENDER", nargs="+", help="stable platform ids, never display names")
    seed.add_argument("--owner", action="store_true", help="as owners (their approval answers count)")
    seed.add_argument("--scope", choices=("dm", "group"), default="dm", help="group: the ids are group chats")
    for parser in (listing, approve, deny, revoke, seed):
        parser.add_argument("--config", help=CONFIG_HELP)
        parser.add_argument("--json", action="store_true", help="print the result as JSON")


def command_pair(args: argparse.Namespace) -> int:
    """With ``nexo run`` up, the request goes through its control socket to its own pairing server
    (no MCP client, no config validation, no second server process); otherwise this command starts
    the pairing server itself."""
    problem = _bad_argument(args)
    if problem is not None:
        return fail(problem)
    method, params = _request(args)
    answered = _through_daemon(args, method, params)
    if answered is not None:
        return answered
    config = load_config(args.config)
    if args.pair_command in ("revoke", "seed"):
        params["platform"] = _platform(config, params["channel"])

    async def action(connection: ServerConnection) -> int:
        from shared.protocol import pairing as p

        request_model, result_model = _MODELS[method]
        request = getattr(p, request_model).model_validate({"method": method, "params": params})
        result = await connection.request(request, getattr(p, result_model), timeout=TIMEOUT_S)
        return _show(args, result.model_dump(mode="json", exclude={"meta"}))

    return run_with_server(config, config.pairing.server, action, hint=PAIRING_HINT)


_MODELS = {
    m.LIST_METHOD: ("ListRequest", "ListResult"),
    m.APPROVE_METHOD: ("ApproveRequest", "ApproveResult"),
    m.DENY_METHOD: ("DenyRequest", "DenyResult"),
    m.REVOKE_METHOD: ("RevokeRequest", "RevokeResult"),
    m.SEED_METHOD: ("SeedRequest", "SeedResult"),
}
"""Method -> the names of its request and result models in :mod:`shared.protocol.pairing`."""


def _bad_argument(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, checked before anything is sent."""
    if args.pair_command == "revoke" and ":" not in args.target:
        return f"expected CHANNEL:SENDER, e.g. telegram:123456789; got {args.target!r}"
    if args.pair_command == "approve":
        from shared.protocol.identities import InvalidCode, normalize_code

        try:
            normalize_code(args.code)
        except InvalidCode as exc:
            return f"{exc} (nothing was sent, so this does not count toward the approval lockout)"
    return None


def _request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The pairing method and its params as JSON, the same for the daemon and the server itself."""
    command = args.pair_command
    if command == "list":
        return m.LIST_METHOD, {"channel": args.channel, "include_revoked": args.all}
    if command == "approve":
        return m.APPROVE_METHOD, {"code": args.code, "by": "cli", "role": _role(args)}
    if command == "deny":
        return m.DENY_METHOD, {"pending_id": args.pending_id}
    if command == "revoke":
        channel, sender = args.target.split(":", 1)
        return m.REVOKE_METHOD, {
            "channel": channel,
            "sender": sender,
            "account": args.account,
            "scope": args.scope,
        }
    return m.SEED_METHOD, {
        "channel": args.channel,
        "account": args.account,
        "senders": args.senders,
        "role": _role(args),
        "scope": args.scope,
        "by": "cli",
    }


def _role(args: argparse.Namespace) -> str:
    return "owner" if args.owner else "contact"


def _through_daemon(args: argparse.Namespace, method: str, params: dict[str, Any]) -> int | None:
    """The request answered by the running daemon; None when none is running."""
    from orchestrator.cli.running import through_daemon

    return through_daemon(args.config, method, params, "pairing", partial(_show, args))


def _platform(config: NexoConfig, channel: str) -> str:
    return config.channel(channel).pairing.platform_for(channel)


def _show(args: argparse.Namespace, result: dict[str, Any]) -> int:
    """Print a pairing result (as JSON, the same from the daemon and from the server itself)."""
    command = args.pair_command
    if args.json:
        print_json(result)
    elif command == "list":
        _print_list(result)
    elif command == "approve":
        record = result["record"]
        print(f"paired {record['channel']}:{record['sender']} as {record['role']}")
    elif command == "deny":
        print(f"request {args.pending_id}: {result['status']}")
    elif command == "revoke" and result["revoked"]:
        print(f"revoked {result['revoked']} pairing(s) of {args.target}")
    elif command == "seed":
        print(f"seeded {len(result['records'])} ({result['changed']} changed) on {args.channel}")
    if command == "revoke" and not result["revoked"]:
        return fail(f"{args.target} is not paired (see `nexo pair list`)")
    return EXIT_OK


def _print_list(listed: dict[str, Any]) -> None:
    lockout, records, pending = listed["lockout"], listed["records"], listed["pending"]
    if lockout["until"]:
        print(f"approvals locked until {lockout['until']} after {lockout['failures']} wrong codes")
    if not records and not pending:
        print("nobody is paired and no request is open")
        return
    for record in records:
        revoked = f"  revoked {record['revoked_at'][:19]}" if record["revoked_at"] else ""
        print(
            f"{record['channel']}:{record['account']}  {record['scope']:5} {record['role']:7} "
            f"{record['sender']}  (via {record['via']} by {record['by']}, "
            f"{record['paired_at'][:19]}){revoked}"
        )
    if pending:
        print("open requests (approve with `nexo pair approve CODE`, the code the sender was given):")
    for request in pending:
        name = f" ({request['display_name']})" if request["display_name"] else ""
        print(
            f"  {request['pending_id']}  {request['channel']}:{request['account']}  "
            f"{request['sender']}{name}  expires {request['expires_at'][:19]}"
        )
