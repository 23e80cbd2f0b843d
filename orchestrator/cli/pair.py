"""``nexo pair list | approve CODE | deny ID | revoke CHANNEL:SENDER | seed CHANNEL ACCOUNT SENDER...``.

Pairing changes only here, out of band, or by the operator's one-tap answer on their own channel:
no model-facing tool can change it. These talk to the pairing server directly, so they work while
``nexo run`` is down.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import EXIT_OK, fail, load_config, print_json, setup_logging
from orchestrator.cli.direct import with_server

if TYPE_CHECKING:
    from orchestrator.config import NexoConfig
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
    setup_logging("WARNING")
    config = load_config(args.config)
    if args.pair_command == "revoke" and ":" not in args.target:
        return fail(f"expected CHANNEL:SENDER, e.g. telegram:123456789; got {args.target!r}")
    if args.pair_command == "approve":
        from shared.protocol.identities import InvalidCode, normalize_code

        try:
            normalize_code(args.code)
        except InvalidCode as exc:
            return fail(f"{exc} (nothing was sent, so this does not count toward the approval lockout)")

    async def action(connection: ServerConnection) -> int:
        return await _run(config, connection, args)

    return anyio.run(lambda: with_server(config, config.pairing.server, action, hint=PAIRING_HINT))


def _platform(config: NexoConfig, channel: str) -> str:
    from orchestrator.intake.admission import platform_of

    return platform_of(channel, config.channel(channel).pairing)


async def _run(config: NexoConfig, connection: ServerConnection, args: argparse.Namespace) -> int:
    from shared.protocol import pairing as p

    command = args.pair_command
    if command == "list":
        listed = await connection.request(
            p.ListRequest(params=p.ListParams(channel=args.channel, include_revoked=args.all)),
            p.ListResult,
            timeout=TIMEOUT_S,
        )
        if args.json:
            print_json(listed.model_dump(mode="json", exclude={"meta"}))
        else:
            _print_list(listed)
        return EXIT_OK
    if command == "approve":
        approved = await connection.request(
            p.ApproveRequest(
                params=p.ApproveParams(code=args.code, by="cli", role="owner" if args.owner else "contact")
            ),
            p.ApproveResult,
            timeout=TIMEOUT_S,
        )
        record = approved.record
        return _done(args, approved, f"paired {record.channel}:{record.sender} as {record.role}")
    if command == "deny":
        denied = await connection.request(
            p.DenyRequest(params=p.DenyParams(pending_id=args.pending_id)), p.DenyResult, timeout=TIMEOUT_S
        )
        return _done(args, denied, f"request {args.pending_id}: {denied.status}")
    if command == "revoke":
        channel, sender = args.target.split(":", 1)
        revoked = await connection.request(
            p.RevokeRequest(
                params=p.RevokeParams(
                    channel=channel,
                    sender=sender,
                    account=args.account,
                    scope=args.scope,
                    platform=_platform(config, channel),
                )
            ),
            p.RevokeResult,
            timeout=TIMEOUT_S,
        )
        if not revoked.revoked:
            return fail(f"{args.target} is not paired (see `nexo pair list`)")
        return _done(args, revoked, f"revoked {revoked.revoked} pairing(s) of {args.target}")
    seeded = await connection.request(
        p.SeedRequest(
            params=p.SeedParams(
                channel=args.channel,
                account=args.account,
                platform=_platform(config, args.channel),
                senders=args.senders,
                role="owner" if args.owner else "contact",
                scope=args.scope,
                by="cli",
            )
        ),
        p.SeedResult,
        timeout=TIMEOUT_S,
    )
    return _done(args, seeded, f"seeded {len(seeded.records)} ({seeded.changed} changed) on {args.channel}")


def _done(args: argparse.Namespace, result: Any, text: str) -> int:
    if args.json:
        print_json(result.model_dump(mode="json", exclude={"meta"}))
    else:
        print(text)
    return EXIT_OK


def _print_list(listed: Any) -> None:
    if listed.lockout.until:
        print(f"approvals locked until {listed.lockout.until} after {listed.lockout.failures} wrong codes")
    if not listed.records and not listed.pending:
        print("nobody is paired and no request is open")
        return
    for record in listed.records:
        revoked = f"  revoked {record.revoked_at[:19]}" if record.revoked_at else ""
        print(
            f"{record.channel}:{record.account}  {record.scope:5} {record.role:7} {record.sender}  "
            f"(via {record.via} by {record.by}, {record.paired_at[:19]}){revoked}"
        )
    if listed.pending:
        print("open requests (approve with `nexo pair approve CODE`, the code the sender was given):")
    for request in listed.pending:
        name = f" ({request.display_name})" if request.display_name else ""
        print(
            f"  {request.pending_id}  {request.channel}:{request.account}  {request.sender}{name}  "
            f"expires {request.expires_at[:19]}"
        )
