"""``nexo agent ps | attach | discover``: the goal registry, read from the audit server.

Goals live in the audit server, not in the orchestrator. With ``nexo run`` up these ask its own
audit server through its control socket; while it is down they start the audit server themselves.
Either way they print the goals' JSON, so both paths share one rendering.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from orchestrator.cli.audit import READ_TIMEOUT_S, run_with_audit
from orchestrator.cli.common import EXIT_OK, fail, print_json
from orchestrator.cli.direct import Action
from shared.protocol.goal_terms import (
    GOAL_GET_METHOD,
    GOAL_KINDS,
    GOAL_LIST_METHOD,
    GOAL_NOT_FOUND,
    TERMINAL_STATUSES,
)

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection

Goal = dict[str, Any]
"""A goal as the audit server's JSON has it (``shared.protocol.audit.goals.Goal`` dumped)."""

PROMPT_COLUMN = 48
CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"


def _time(value: str | None) -> str:
    return "-" if value is None else value[:19].replace("T", " ")


def _origin(goal: Goal) -> str:
    origin = goal["origin"]
    where = origin.get("chat_id") or origin.get("session_key")
    return str(origin["source"]) if where is None else f"{origin['source']} ({where})"


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _phase(goal: Goal) -> str:
    """What a live goal is doing; a finished goal has no phase, whatever an older ledger kept."""
    if goal["status"] in TERMINAL_STATUSES:
        return "-"
    return _clip(goal["phase"], 20) or "-"


def goals_table(goals: list[Goal]) -> str:
    rows = [["ID", "KIND", "STATUS", "AGENT", "PHASE", "STARTED", "ORIGIN", "PROMPT"]]
    for goal in goals:
        rows.append(
            [
                goal["id"],
                goal["kind"],
                goal["status"],
                goal["agent"],
                _phase(goal),
                _time(goal.get("started_at")),
                _clip(_origin(goal), 32),
                _clip(goal["prompt"].strip().split("\n", 1)[0], PROMPT_COLUMN),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    )


def snapshot(goal: Goal) -> str:
    """``nexo agent attach``: one goal as markdown."""
    budget = goal["budget"]
    lines = [
        f"## Goal {goal['id']}: {goal['status']} ({goal['kind']})",
        "",
        f"- **agent:** {goal['agent']}",
        f"- **prompt:** {' '.join(goal['prompt'].split()) or '-'}",
        f"- **origin:** {_origin(goal)}",
        f"- **phase:** {_phase(goal)}",
        f"- **created:** {_time(goal['created_at'])}",
        f"- **started:** {_time(goal.get('started_at'))}",
        f"- **finished:** {_time(goal.get('finished_at'))}",
        f"- **last decision:** {goal['last_decision'] or '-'}",
        f"- **last event:** {goal['last_event'] or '-'}",
        f"- **budget used:** {budget['turns']} turns, {budget['tokens']} tokens, ${budget['cost_usd']:.4f}, "
        f"{budget['wall_s']:.1f} s wall",
        f"- **outcome:** {goal['outcome'] or '-'}",
    ]
    if goal["status"] == "lost_on_restart":
        lines.append(f"- **origin told:** {'yes' if goal['notified'] else 'not yet'}")
    return "\n".join(lines)


def add_goal_subparsers(agent_sub: Any) -> None:
    """Add ``ps``, ``attach`` and ``discover`` to the ``nexo agent`` subparsers."""
    ps = agent_sub.add_parser("ps", help="goals that are running, sleeping, queued or paused")
    ps.add_argument("--config", help=CONFIG_HELP)
    ps.add_argument("--all", action="store_true", help="also finished goals (the newest 200)")
    ps.add_argument("--kind", help="only this kind: interactive, bg, daemon or daemon_worker")
    ps.add_argument("--json", action="store_true", help="print the goals as JSON")
    attach = agent_sub.add_parser("attach", help="a snapshot of one goal: status, phase, times, budget")
    attach.add_argument("goal", metavar="GOAL", help="goal id, as shown by `nexo agent ps`")
    attach.add_argument("--config", help=CONFIG_HELP)
    attach.add_argument("--json", action="store_true", help="print the goal as JSON")
    discover = agent_sub.add_parser("discover", help="live background goals (bg, daemon, daemon_worker)")
    discover.add_argument("--config", help=CONFIG_HELP)
    discover.add_argument("--include-interactive", action="store_true", help="also chat-driven goals")
    discover.add_argument("--json", action="store_true", help="print the goals as JSON")


def _list_params(args: argparse.Namespace, *, discover: bool) -> dict[str, Any]:
    return {"active_only": discover or not args.all, "kind": getattr(args, "kind", None)}


def _show_listing(args: argparse.Namespace, result: dict[str, Any], *, discover: bool) -> int:
    goals: list[Goal] = result["goals"]
    if discover and not args.include_interactive:
        goals = [goal for goal in goals if goal["kind"] != "interactive"]
    if args.json:
        print_json({"goals": goals, "running": result["running"], "max_running": result["max_running"]})
        return EXIT_OK
    print(f"running {result['running']} of at most {result['max_running']}")
    print(goals_table(goals) if goals else "no matching goals")
    return EXIT_OK


def _show_goal(args: argparse.Namespace, goal: Goal) -> int:
    if args.json:
        print_json(goal)
    else:
        print(snapshot(goal))
    return EXIT_OK


def _not_found(args: argparse.Namespace) -> int:
    return fail(f"no goal {args.goal!r}; list the goals with `nexo agent ps --all`")


def _listing(args: argparse.Namespace, *, discover: bool) -> Action:
    from shared.protocol.audit.methods import GoalListParams, GoalListRequest, GoalListResult

    async def action(audit: ServerConnection) -> int:
        params = GoalListParams.model_validate(_list_params(args, discover=discover))
        result = await audit.request(GoalListRequest(params=params), GoalListResult, timeout=READ_TIMEOUT_S)
        return _show_listing(args, result.model_dump(mode="json", exclude={"meta"}), discover=discover)

    return action


def _attach(args: argparse.Namespace) -> Action:
    from mcp import MCPError

    from shared.protocol.audit.methods import GoalGetParams, GoalGetRequest, GoalGetResult

    async def action(audit: ServerConnection) -> int:
        request = GoalGetRequest(params=GoalGetParams(id=args.goal))
        try:
            goal = (await audit.request(request, GoalGetResult, timeout=READ_TIMEOUT_S)).goal
        except MCPError as exc:
            if exc.code != GOAL_NOT_FOUND:
                raise
            return _not_found(args)
        return _show_goal(args, goal.model_dump(mode="json"))

    return action


def _through_daemon(args: argparse.Namespace, *, discover: bool) -> int | None:
    """The goals as the running daemon's audit server has them; None when no daemon runs."""
    from orchestrator.cli.running import ask_running

    attach = args.agent_command == "attach"
    if attach:
        answer = ask_running(args.config, GOAL_GET_METHOD, {"id": args.goal})
    else:
        answer = ask_running(args.config, GOAL_LIST_METHOD, _list_params(args, discover=discover))
    if answer is None:
        return None
    result = answer.get("result")
    if isinstance(result, dict):
        return _show_goal(args, result["goal"]) if attach else _show_listing(args, result, discover=discover)
    if attach and answer.get("code") == GOAL_NOT_FOUND:
        return _not_found(args)
    return fail(f"audit: {answer.get('error', answer)}")


def command_goals(args: argparse.Namespace) -> int:
    """Run ``nexo agent ps``, ``attach`` or ``discover`` (``args.agent_command``)."""
    command = args.agent_command
    discover = command == "discover"
    kind = getattr(args, "kind", None)
    if kind is not None and kind not in GOAL_KINDS:
        return fail(f"unknown goal kind {kind!r}: use one of {', '.join(GOAL_KINDS)}")
    answered = _through_daemon(args, discover=discover)
    if answered is not None:
        return answered
    if command == "attach":
        return run_with_audit(args, _attach(args))
    return run_with_audit(args, _listing(args, discover=discover))
