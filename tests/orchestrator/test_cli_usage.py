"""How `nexo` answers a command line it cannot parse: usage on stderr and exit 64, never 2."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pytest

from orchestrator.cli.main import COMMANDS, build_parser, main


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ((), "nexo: error: the following arguments are required: COMMAND"),
        (("mystery",), "nexo: error: argument COMMAND: invalid choice: 'mystery'"),
        (("memory", "forget"), "nexo memory forget: error: the following arguments are required: id"),
        (("memory", "forget", "seven"), "nexo memory forget: error: argument id: invalid int value: 'seven'"),
        (("status", "--colour"), "nexo: error: unrecognized arguments: --colour"),
    ],
)
def test_a_usage_error_exits_64_with_the_usage(
    argv: Sequence[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 64
    assert err.startswith("usage: nexo")
    assert complaint in err


def _subcommand_help(parser: argparse.ArgumentParser, command: str) -> str:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return str(action.choices[command].format_help())


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_parser_of_one_command_is_that_command_of_the_whole_parser(command: str) -> None:
    """``main`` builds only the named command's parser: it must parse and explain exactly as the
    whole one (which ``nexo --help`` and the docs checks use)."""
    assert _subcommand_help(build_parser(command), command) == _subcommand_help(build_parser(), command)
