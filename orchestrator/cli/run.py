"""``nexo run``: validate the config, then run the orchestrator (optionally with the chat attached)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from orchestrator.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    config_label,
    fail,
    load_config,
    setup_logging,
)


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
    setup_logging(config.log_level, config.log_format)
    from orchestrator.daemon import Orchestrator
    from orchestrator.lock import AlreadyRunning

    orchestrator = Orchestrator(config, config_label=config_label(args.config))
    on_ready = None
    if args.chat:
        from orchestrator.cli.chat import chat, console_socket

        async def attach(_: Any) -> None:
            await chat(
                console_socket(config.state_path),
                chat_id="operator",
                timeout_s=300.0,
                stdin=sys.stdin,
                out=sys.stdout,
                err=sys.stderr,
            )

        on_ready = attach
    try:
        anyio.run(lambda: orchestrator.run(on_ready=on_ready))
    except AlreadyRunning as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        pass
    return EXIT_OK
