"""``nexo run``: validate the config, then run the orchestrator (optionally with the chat attached)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from orchestrator import start_signals
from orchestrator.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    config_label,
    fail,
    load_config,
    setup_logging,
)
from orchestrator.cli.run_log import TerminalNotices, divert_stderr, log_file
from orchestrator.preloads import DAEMON_LEAVES
from orchestrator.sockets import CONSOLE_SOCKET, CONTROL_SOCKET
from orchestrator.state_dirs import Repair, StateDirError, prepare_state_dirs

if TYPE_CHECKING:
    from orchestrator.lock import InstanceLock
    from orchestrator.mesh.forkserver import ForkServer

logger = logging.getLogger("nexo.run")


def command_run(args: argparse.Namespace) -> int:
    from orchestrator.cli.check import check
    from orchestrator.config.preflight import provider_keys_missing, stdio_commands_missing
    from shared.settings import ConfigError

    config = load_config(args.config)
    label = config_label(args.config)
    problems = stdio_commands_missing(config, label) + provider_keys_missing(config, label)
    if problems:
        print(str(ConfigError(problems)), file=sys.stderr)
        return EXIT_FAIL
    if args.check_config:
        from orchestrator.child_env import child_env
        from orchestrator.cli.direct import started_unless_running

        with started_unless_running(config, config.servers, child_env(config)) as forked:
            return anyio.run(check, config, args, forked)
    from orchestrator.config.nexo import workspace_root

    try:
        sockets = (CONTROL_SOCKET, CONSOLE_SOCKET) if "console" in config.servers else (CONTROL_SOCKET,)
        repairs = prepare_state_dirs(config.state_path, workspace=workspace_root(config), sockets=sockets)
    except StateDirError as exc:
        return fail(str(exc))
    terminal = sys.stderr
    log = log_file(config.state_path)
    if args.chat:
        terminal = divert_stderr(log)
    status = EXIT_OK
    # From the first line on, a person may press Ctrl-C: until the orchestrator's own handling is
    # in place, it is noted and each stage of the start stops at its end (see start_signals).
    with start_signals.noted():
        try:
            if args.chat:
                print(
                    f"nexo: starting {len(config.servers)} servers; the log is in {log} "
                    f"(`tail -f {log}` to follow)",
                    file=terminal,
                    flush=True,
                )
            status = _run(config, args, terminal, repairs)
        except* KeyboardInterrupt:
            # A second Ctrl-C while a stage of the start blocked.
            status = EXIT_OK
        if start_signals.requested() is not None:
            print(file=terminal)
    if args.chat and status == EXIT_OK:
        print(f"nexo: stopped; the log is in {log}", file=terminal, flush=True)
    return status


def _run(config: Any, args: argparse.Namespace, terminal: TextIO, repairs: list[Repair]) -> int:
    from orchestrator.child_env import child_env
    from orchestrator.lock import AlreadyRunning, InstanceLock
    from orchestrator.mesh.mesh import early_fork_server, prestart
    from shared.forkserver import PRELOAD

    label = config_label(args.config)
    base_env = child_env(config)
    if start_signals.requested() is not None:
        return EXIT_OK
    # Before the lock is taken, logging is configured and the event loop and its threads exist:
    # the template shares this process's imports and starts from the interpreter's default logging.
    # What of the template's preloads the daemon imports anyway is imported here first, so its pages
    # are shared with the template; the rest is left to the template, on the other core.
    fork_server = early_fork_server(
        config.servers,
        base_env=base_env,
        enabled=config.fork_server,
        shared=[name for name in PRELOAD if name not in DAEMON_LEAVES],
    )
    try:
        with InstanceLock(config.state_path, config=label) as lock:
            if start_signals.requested() is not None:
                return EXIT_OK
            if fork_server is not None:
                # The servers start on the other core while this process imports and builds the rest.
                prestart(fork_server, config.servers, base_env=base_env)
            return _serve(config, args, terminal, repairs, fork_server, lock)
    except AlreadyRunning as exc:
        print(f"nexo: {exc}", file=terminal)
        return EXIT_FAIL
    finally:
        if fork_server is not None:
            fork_server.close()


def _serve(
    config: Any,
    args: argparse.Namespace,
    terminal: TextIO,
    repairs: list[Repair],
    fork_server: ForkServer | None,
    lock: InstanceLock,
) -> int:
    from orchestrator.daemon.orchestrator import Orchestrator

    orchestrator = Orchestrator(
        config, config_label=config_label(args.config), fork_server=fork_server, locked=lock
    )
    setup_logging(config.log_level, config.log_format)
    if args.chat:
        logging.getLogger().addHandler(TerminalNotices(terminal))
    for repair in repairs:
        logger.warning("%s", repair)
    on_ready = None
    if args.chat:
        from orchestrator.cli.chat_loop import chat
        from orchestrator.sockets import console_path

        async def attach(_: Any) -> None:
            await chat(
                console_path(config.state_path),
                chat_id="operator",
                timeout_s=300.0,
                stdin=sys.stdin,
                out=sys.stdout,
                err=terminal,
            )

        on_ready = attach
    if start_signals.requested() is None:
        # A signal noted from here on is the orchestrator's to act on, once its handling is in place.
        anyio.run(lambda: orchestrator.run(on_ready=on_ready))
    return EXIT_OK
