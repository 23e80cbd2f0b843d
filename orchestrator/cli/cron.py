"""``nexo cron list | pause | resume | drop | fire`` and ``nexo autonomy status | pause | resume``.

With ``nexo run`` up, ``cron list`` asks the daemon's own cron server through the control socket;
otherwise, and the other cron commands always, they talk to the cron server directly (they work
while ``nexo run`` is down). The autonomy switch goes through the running daemon; when it is down,
the switch is written to the audit ledger, where the next start reads it.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import EXIT_OK, fail, load_config, print_json, setup_logging
from orchestrator.cli.direct import run_with_server

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"
TIMEOUT_S = 30.0
AUTONOMY_TIMEOUT_S = 10.0
CRON_HINT = "add it under servers: in the config, e.g. cron: {transport: stdio, args: [-m, servers.cron]}"


def add_cron_parsers(sub: Any) -> None:
    cron = sub.add_parser("cron", help="scheduled prompts, reminders and pollers")
    cron_sub = cron.add_subparsers(dest="cron_command", required=True, metavar="SUBCOMMAND")
    listing = cron_sub.add_parser("list", help="entries with their next fire and last outcome")
    listing.add_argument("--binding", help="only this binding (an agent id)")
    listing.add_argument("--all", action="store_true", help="also finished entries")
    parsers = [listing]
    for name, text in (
        ("pause", "stop an entry firing until resumed"),
        ("resume", "fire again from the next slot (a parked entry too)"),
        ("drop", "delete an entry"),
        ("fire", "fire an entry now, once"),
    ):
        parser = cron_sub.add_parser(name, help=text)
        parser.add_argument("id", metavar="ID", help="as `nexo cron list` shows it")
        parsers.append(parser)
    for parser in parsers:
        parser.add_argument("--config", help=CONFIG_HELP)
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    autonomy = sub.add_parser("autonomy", help="the kill switch of everything the agent does on its own")
    autonomy_sub = autonomy.add_subparsers(dest="autonomy_command", required=True, metavar="SUBCOMMAND")
    for name, text in (
        ("status", "on or paused, today's spend, actions in the last hour"),
        ("pause", "stop heartbeat, proactive ticks and cron fires now"),
        ("resume", "let them run again"),
    ):
        parser = autonomy_sub.add_parser(name, help=text)
        parser.add_argument("--config", help=CONFIG_HELP)
        parser.add_argument("--json", action="store_true", help="print the status as JSON")


def command_cron(args: argparse.Namespace) -> int:
    if args.cron_command == "list":
        shown = _list_through_daemon(args)
        if shown is not None:
            return shown
    config = load_config(args.config)

    async def action(connection: ServerConnection) -> int:
        return await _cron(connection, args)

    return run_with_server(config, config.cron.server, action, hint=CRON_HINT)


async def _cron(connection: ServerConnection, args: argparse.Namespace) -> int:
    from shared.protocol import cron as c

    command = args.cron_command
    if command == "list":
        listed = await connection.request(
            c.ListRequest(params=c.ListParams.model_validate(_list_params(args))),
            c.ListResult,
            timeout=TIMEOUT_S,
        )
        return _show_list(args, listed.model_dump(mode="json", exclude={"meta"}))
    if command == "fire":
        fired = await connection.request(
            c.FireRequest(params=c.FireParams(id=args.id)), c.FireResult, timeout=TIMEOUT_S
        )
        return _done(args, fired, f"fired {args.id}: fire {fired.fire.id}, the running agent handles it")
    if command == "drop":
        dropped = await connection.request(
            c.DropRequest(params=c.EntryIdParams(id=args.id)), c.DropResult, timeout=TIMEOUT_S
        )
        if not dropped.dropped:
            return fail(f"no cron entry {args.id!r}; see `nexo cron list`")
        return _done(args, dropped, f"dropped {args.id}")
    request = c.PauseRequest if command == "pause" else c.ResumeRequest
    changed = await connection.request(
        request(params=c.EntryIdParams(id=args.id)), c.EntryResult, timeout=TIMEOUT_S
    )
    entry = changed.entry
    return _done(args, changed, f"{entry.id} is {entry.state}; next {entry.next_due or '-'}")


def _list_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"binding": args.binding, "include_finished": args.all}


def _list_through_daemon(args: argparse.Namespace) -> int | None:
    """``nexo cron list`` answered by the running daemon's own cron server (no config validated, no
    MCP client, no second server); None when no daemon runs."""
    from orchestrator.cli.running import through_daemon
    from shared.protocol.cron_terms import LIST_METHOD

    return through_daemon(args.config, LIST_METHOD, _list_params(args), "cron", partial(_show_list, args))


def _show_list(args: argparse.Namespace, listed: dict[str, Any]) -> int:
    """Print the entries (the same JSON from the daemon and from the server itself)."""
    if args.json:
        print_json(listed)
        return EXIT_OK
    if not listed["entries"]:
        print("no cron entries")
    for entry in listed["entries"]:
        due = entry.get("next_due_local") or entry.get("next_due") or "-"
        last = entry.get("last_fire") or "-"
        print(
            f"{entry['id']}  {entry['binding']:<10} {entry['state']:<7} {entry['kind']:<10} "
            f"{entry['schedule']} ({entry['timezone']})  next {due[:19]}  last {last}  "
            f"{' '.join(str(entry['text']).split())[:60]}"
        )
    return EXIT_OK


def _done(args: argparse.Namespace, result: Any, text: str) -> int:
    if args.json:
        print_json(result.model_dump(mode="json", exclude={"meta"}))
    else:
        print(text)
    return EXIT_OK


def command_autonomy(args: argparse.Namespace) -> int:
    from orchestrator.cli.running import answer_if_running

    action = args.autonomy_command
    # The config is loaded (every model behind it imported) only when no daemon runs and the switch
    # goes into the ledger.
    answer = answer_if_running(args.config, {"op": "autonomy", "action": action}, AUTONOMY_TIMEOUT_S)
    if answer is None:
        if action == "status":
            return fail(
                "nexo is not running; `nexo autonomy status` needs the daemon (start it with `nexo run`)"
            )
        setup_logging("WARNING")
        return anyio.run(_record_offline, load_config(args.config), action, args.json)
    if "error" in answer:
        return fail(str(answer["error"]))
    status = answer["autonomy"]
    if args.json:
        print_json(status)
        return EXIT_OK
    state = "on" if status["enabled"] else f"paused ({status['paused_by']})"
    day = status["day"]
    usd = f", ${day['usd']:.4f}" if day.get("usd") is not None else ""
    print(f"autonomy: {state}")
    print(
        f"today: {day['input_tokens']}+{day['output_tokens']} tokens{usd}; resets {status['day_resets_at']}"
    )
    if status.get("interrupted_at_start"):
        print(
            f"interrupted by the last restart: {status['interrupted_at_start']} unattended goal(s), "
            "not resumed (`nexo agent ps --kind daemon`)"
        )
    for agent, info in sorted(status["agents"].items()):
        print(
            f"  {agent}: heartbeat {'on' if info['heartbeat'] else 'off'}, proactive "
            f"{'on' if info['proactive'] else 'off'}, {info['actions_last_hour']} actions in the last hour"
        )
        print(f"    charged as {info['model']} at {_price_text(info['price'])}")
    return EXIT_OK


def _price_text(price: dict[str, Any] | None) -> str:
    if price is None:
        return "no price (a usd budget cannot apply; add autonomy.prices for this model)"
    return (
        f"{price['key']}: ${price['input_per_mtok']:g} in / ${price['output_per_mtok']:g} out per "
        "million tokens"
    )


async def _record_offline(config: Any, action: str, as_json: bool) -> int:
    """The daemon is down: the switch goes into the ledger, which the next start reads."""
    from orchestrator.cli.audit import with_audit
    from orchestrator.proactive.runtime import KILL_SWITCH_PATH
    from shared.protocol.audit.bodies import ConfigChangeBody
    from shared.protocol.audit.entries import EntryDraft
    from shared.protocol.audit.methods import AppendParams, AppendRequest, AppendResult

    what = "paused" if action == "pause" else "resumed"

    async def append(connection: ServerConnection) -> int:
        body = ConfigChangeBody(path=KILL_SWITCH_PATH, change="set", detail=f"{what} by cli")
        draft = EntryDraft.of(body, source="cli", subject=f"autonomy {what}")
        await connection.request(
            AppendRequest(params=AppendParams(entries=[draft])), AppendResult, timeout=TIMEOUT_S
        )
        if as_json:
            print_json({"enabled": action == "resume", "recorded": True, "running": False})
        else:
            print(f"autonomy {what}; nexo is not running, the next start applies it", file=sys.stderr)
        return EXIT_OK

    return await with_audit(config, append)
