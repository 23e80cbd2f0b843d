"""``nexo status``: what the running orchestrator reports about each server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_WARN, print_json
from orchestrator.control import ask_status
from orchestrator.sockets import control_path


def command_status(args: argparse.Namespace) -> int:
    from orchestrator.cli.locate import state_dir

    state = state_dir(args.config)
    path = control_path(state)
    try:
        status = anyio.run(ask_status, path)
    except (OSError, TimeoutError) as exc:
        message = f"nexo is not running on {state} ({exc.__class__.__name__}); start it with `nexo run`"
        if args.json:
            print_json({"running": False, "error": message})
        else:
            print(f"nexo: {message}", file=sys.stderr)
        return EXIT_FAIL
    status["running"] = True
    degraded = [s for s in status["servers"] if s["state"] != "ready"] + status.get("storage", [])
    if args.json:
        print_json(status)
    else:
        for warning in status.get("warnings", []):
            print(f"WARNING: {warning}")
        for line in refusal_lines(status.get("refused", [])):
            print(line)
        print(f"nexo pid {status['pid']}  up {status['uptime_s']}s  config {status['config']}")
        autonomy = status.get("autonomy") or {}
        if autonomy and not autonomy.get("enabled"):
            print(f"autonomy: paused ({autonomy.get('paused_by')})")
        print(f"{'SERVER':<12} {'TRANSPORT':<9} {'STATE':<9} {'TOOLS':>5}  LAST ERROR")
        for server in status["servers"]:
            error = server["last_error"] or "-"
            if server.get("next_try_in_s") is not None:
                error = f"next try in {server['next_try_in_s']:g}s; {error}"
            name, transport, state, tools = (
                server["name"],
                server["transport"],
                server["state"],
                server["tools"],
            )
            print(f"{name:<12} {transport:<9} {state:<9} {tools:>5}  {error}")
        for agent in status["agents"]:
            channels = ", ".join(agent["channels"]) or "-"
            print(
                f"agent {agent['id']}: {agent['provider']}; channels {channels}; handled {agent['handled']}"
            )
        _print_activity(status)
    return EXIT_WARN if degraded or status.get("refused") else EXIT_OK


def refusal_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per (agent, channel, reason, source) the pairing gate refused, with the fix."""
    from orchestrator.intake.refusals import Refusal

    fields = set(Refusal.__dataclass_fields__)
    return [
        f"{Refusal(**{k: v for k, v in row.items() if k in fields}).line()} (agent {row.get('agent', '-')})"
        for row in rows
    ]


def _total(counters: dict[str, Any], name: str, **match: str) -> float:
    rows = counters.get(name, [])
    return float(sum(r["value"] for r in rows if all(r.get(k) == v for k, v in match.items())))


def _print_activity(status: dict[str, Any]) -> None:
    goals = status.get("goals", {})
    live = goals.get("live", [])
    audit = goals.get("audit", {})
    print(
        f"goals in flight: {len(live)}"
        + "".join(f"\n  {g['id']} {g['kind']} ({g['agent']}, {g['origin']})" for g in live)
    )
    print(
        f"audit: {audit.get('sent', 0)} entries sent, {audit.get('queued', 0)} queued, "
        f"{audit.get('dropped', 0)} not recorded"
    )
    metrics = status.get("metrics", {})
    counters = metrics.get("counters", {})
    print(
        f"since start: {_total(counters, 'nexo_turns'):.0f} turns, "
        f"{_total(counters, 'nexo_tool_calls'):.0f} tool calls "
        f"({_total(counters, 'nexo_tool_calls', outcome='error'):.0f} failed, "
        f"{_total(counters, 'nexo_tool_calls', outcome='denied'):.0f} denied), "
        f"{_total(counters, 'nexo_tokens'):.0f} tokens, "
        f"{_total(counters, 'nexo_channel_messages', direction='in'):.0f} messages in"
    )
    print(f"metrics: {metrics.get('url') or 'off (set metrics.port)'}")
