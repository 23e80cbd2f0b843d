"""``nexo agent run PROMPT``: one goal in the foreground, progress to stderr; exit code from the outcome."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator import gc_pause
from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, fail, load_config, print_json, setup_logging
from orchestrator.preloads import SERVERS_ONLY

EXIT_INTERRUPTED = 130
"""Ctrl-C, as shells report a command ended by SIGINT."""

if TYPE_CHECKING:
    from orchestrator.loop.tools import Decision
    from orchestrator.mesh import CatalogTool, Mesh


class TerminalApprover:
    """Answers the policy's "ask" on this terminal (or denies when nobody can answer)."""

    def __init__(self, assume_yes: bool) -> None:
        self.assume_yes = assume_yes

    async def ask(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        call_id: str,
        relays: Sequence[Any],
        *,
        origin: str = "",
    ) -> Decision:
        from orchestrator.loop.tools import Decision

        if self.assume_yes:
            return Decision(True, "approved by --yes")
        if not sys.stdin.isatty():
            return Decision(False, f"{tool.qualified} needs approval and stdin is not a terminal (use --yes)")
        question = f"allow {tool.qualified} {arguments}? [y/N] "
        answer = await anyio.to_thread.run_sync(lambda: input(question))
        if answer.strip().lower() in ("y", "yes"):
            return Decision(True, "approved on the terminal")
        return Decision(False, "denied on the terminal")


def terminal_gate(config: Any, agent: Any, assume_yes: bool) -> Any:
    """The agent's permission policy, asking on this terminal; --yes answers asks, never denials."""
    from orchestrator.config.nexo import workspace_root
    from orchestrator.permissions import PolicyEngine, PolicyGate

    engine = PolicyEngine(agent.permissions, workspace=workspace_root(config))
    return PolicyGate(TerminalApprover(assume_yes), list, engine)


def foreground_servers(config: Any, agent: Any) -> dict[str, Any]:
    """The servers a foreground goal of ``agent`` starts: those that can offer a tool it may use,
    but no channel server (they stay with the daemon; a foreground goal answers on this terminal,
    and a channel started here would take its platform's messages in the daemon's place), nor the
    pairing server, which gates senders this goal does not have, unless ``allowed_tools`` names it."""
    from orchestrator.mesh.catalog import may_offer, names

    skipped = {name for each in config.agents for name in each.channels}
    skipped |= {entry.server for entry in config.channels.approved}
    if not names(config.pairing.server, agent.allowed_tools):
        skipped.add(config.pairing.server)
    return {
        name: server
        for name, server in config.servers.items()
        if name not in skipped and may_offer(name, agent.allowed_tools)
    }


def foreground_mesh(args: argparse.Namespace) -> tuple[Any, Any, Mesh]:
    """The config, the agent and a mesh of the tool servers it may use, already starting from the
    fork server's template forked from this process (before the event loop starts) when there is one."""
    from orchestrator.child_env import child_env
    from orchestrator.mesh import Mesh

    config = load_config(args.config)
    agent = config.agent(args.agent)
    servers = foreground_servers(config, agent)
    from shared.forkserver import PRELOAD

    mesh = Mesh(servers, config.supervision, base_env=child_env(config), fork_server=config.fork_server)
    mesh.fork_template(shared=[name for name in PRELOAD if name not in SERVERS_ONLY])
    # They start on the other core while this process imports the model's client and the loop.
    mesh.prestart()
    return config, agent, mesh


async def _run(args: argparse.Namespace, config: Any, agent: Any, mesh: Mesh) -> int:
    from orchestrator.llm import build_provider
    from orchestrator.loop import Outcome, ToolRunner, run_goal

    servers = mesh.connections
    provider = build_provider(agent.model.provider, config.llm.providers[agent.model.provider])

    async def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        async with mesh:
            async with anyio.create_task_group() as warming:
                warming.start_soon(provider.warm)  # its TLS context beside the servers' start
                await progress(f"starting {len(servers)} servers: {', '.join(servers) or '-'}")
                for name in await mesh.wait_ready(30.0):
                    await progress(f"server {name} not ready: {mesh[name].last_error}")
            gc_pause.resume(freeze=True)  # the start is over (see gc_pause)
            result = await run_goal(
                provider=provider,
                system=agent.system_prompt,
                prompt=args.prompt,
                catalog=mesh.catalog(allowed=agent.allowed_tools),
                runner=ToolRunner(mesh),
                gate=terminal_gate(config, agent, args.yes),
                budgets=agent.budgets,
                max_tokens=agent.model.max_tokens,
                progress=progress,
            )
    finally:
        await provider.aclose()
    if args.json:
        print_json(result.report())
    else:
        if result.text:
            print(result.text)
        print(f"[{result.summary()}]", file=sys.stderr)
    return EXIT_OK if result.outcome is Outcome.DONE else EXIT_FAIL


def command_agent_run(args: argparse.Namespace) -> int:
    if args.bg:
        return _to_daemon(args, {"op": "submit", "prompt": args.prompt, "agent": args.agent})
    if not args.yes:
        handed = _in_daemon(args)
        if handed is not None:
            return handed
    gc_pause.pause()  # again, if a daemon's socket was found but no daemon answered
    config, agent, mesh = foreground_mesh(args)
    setup_logging("WARNING")
    return anyio.run(_run, args, config, agent, mesh)


def _in_daemon(args: argparse.Namespace) -> int | None:
    """Run the goal in the running daemon, whose servers are up already; None when none is running.

    The daemon's own policy and approval relays apply (its approvals reach the operator's channels,
    e.g. ``nexo chat``), which is why ``--yes`` always runs the goal here instead.
    """
    from orchestrator.cli.locate import state_dir
    from orchestrator.control import ask
    from orchestrator.sockets import control_path

    path = control_path(state_dir(args.config))
    if not path.exists():
        return None
    request = {"op": "run", "prompt": args.prompt, "agent": args.agent}
    gc_pause.resume(freeze=False)  # the goal runs in the daemon: this process only waits for it
    try:
        answer = anyio.run(ask, path, request, None)
    except (ConnectionRefusedError, FileNotFoundError):
        return None  # a socket left behind by a daemon that is gone
    except (OSError, anyio.EndOfStream, anyio.IncompleteRead) as exc:
        return fail(
            f"the running nexo stopped before the goal ended ({exc.__class__.__name__}); "
            "see `nexo agent ps --all` and `nexo status`"
        )
    except KeyboardInterrupt:
        print("nexo: interrupted; the goal is cancelled in the running nexo", file=sys.stderr)
        return EXIT_INTERRUPTED
    if "outcome" not in answer:
        return fail(str(answer.get("error", answer)))
    if args.json:
        print_json({key: value for key, value in answer.items() if key != "summary"})
    else:
        if answer.get("text"):
            print(answer["text"])
        print(f"[{answer['summary']}; goal {answer['goal_id']} in the running nexo]", file=sys.stderr)
    return EXIT_OK if answer["outcome"] == "done" else EXIT_FAIL


def command_agent_cancel(args: argparse.Namespace) -> int:
    return _to_daemon(args, {"op": "cancel", "goal": args.goal})


def _to_daemon(args: argparse.Namespace, request: dict[str, Any]) -> int:
    from orchestrator.cli.running import NotAnswered, daemon_answer

    try:
        answer = daemon_answer(args.config, request)
    except NotAnswered as exc:
        return fail(str(exc))
    if args.json:
        print_json(answer)
    elif "goal_id" in answer:
        print(answer["goal_id"])
        print(
            f"started in the background; follow it with `nexo agent attach {answer['goal_id']}`",
            file=sys.stderr,
        )
    else:
        print(f"cancelled {answer['cancelled']}")
    return EXIT_OK
