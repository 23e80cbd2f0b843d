"""``nexo run``: validate the config, then run the orchestrator (optionally with the chat attached)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, TextIO

import anyio

from orchestrator.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    config_label,
    fail,
    load_config,
    setup_logging,
)
from orchestrator.cli.run_log import TerminalNotices, divert_stderr, log_file
from orchestrator.state_dirs import CONSOLE_SOCKET, CONTROL_SOCKET, Repair, StateDirError, prepare_state_dirs

logger = logging.getLogger("nexo.run")


def command_run(args: argparse.Namespace) -> int:
    from orchestrator.cli.check import check
    from orchestrator.config import provider_keys_missing, stdio_commands_missing
    from shared.settings import ConfigError

    config = load_config(args.config)
    label = config_label(args.config)
    problems = stdio_commands_missing(config, label) + provider_keys_missing(config, label)
    if problems:
        print(str(ConfigError(problems)), file=sys.stderr)
        return EXIT_FAIL
    if args.check_config:
        return anyio.run(check, config, args)
    from orchestrator.config import workspace_root

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
    try:
        # The first line is inside the handler: a person may press Ctrl-C the moment they see it.
        if args.chat:
            print(
                f"nexo: starting {len(config.servers)} servers; the log is in {log} "
                f"(`tail -f {log}` to follow)",
                file=terminal,
                flush=True,
            )
        status = _run(config, args, terminal, repairs)
    except* KeyboardInterrupt:
        # Ctrl-C before the orchestrator's own signal handling is in place, raised bare or from
        # inside a task group that was still starting.
        print(file=terminal)
    if args.chat and status == EXIT_OK:
        print(f"nexo: stopped; the log is in {log}", file=terminal, flush=True)
    return status


def _run(config: Any, args: argparse.Namespace, terminal: TextIO, repairs: list[Repair]) -> int:
    from orchestrator.daemon import Orchestrator
    from orchestrator.lock import AlreadyRunning

    orchestrator = Orchestrator(config, config_label=config_label(args.config))
    # Before logging is configured and before the event loop and its threads exist: the template
    # shares this process's imports and starts from the interpreter's default logging.
    orchestrator.mesh.fork_template()
    setup_logging(config.log_level, config.log_format)
    if args.chat:
        logging.getLogger().addHandler(TerminalNotices(terminal))
    for repair in repairs:
        logger.warning("%s", repair)
    on_ready = None
    if args.chat:
        from orchestrator.cli.chat_loop import chat
        from orchestrator.sockets import console_path as console_socket

        async def attach(_: Any) -> None:
            await chat(
                console_socket(config.state_path),
                chat_id="operator",
                timeout_s=300.0,
                stdin=sys.stdin,
                out=sys.stdout,
                err=terminal,
            )

        on_ready = attach
    try:
        anyio.run(lambda: orchestrator.run(on_ready=on_ready))
    except AlreadyRunning as exc:
        print(f"nexo: {exc}", file=terminal)
        return EXIT_FAIL
    return EXIT_OK
