"""Server messages written for a model reach a person as ``nexo`` commands, never as tool names."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cli.common import fail
from orchestrator.cli.main import build_parser, main
from orchestrator.cli.wording import CALLED_ONLY, COMMAND_FOR, for_person
from tests.mesh.harness import python_server, write_config


@pytest.mark.parametrize(
    ("model_facing", "for_a_person"),
    [
        (
            "there is no memory with id 7; call memory_recall to find the id of a memory",
            "there is no memory with id 7; run `nexo memory search` to find the id of a memory",
        ),
        (
            "unknown revision 'ab12' of MEMORY.md for agent 'nexo'; call history to list revisions",
            "unknown revision 'ab12' of MEMORY.md for agent 'nexo'; run `nexo memory history` to list "
            "revisions",
        ),
        (
            "no cron entry 'c-9'; list the entries with cron_list (or nexo/cron/list) and use one of "
            "their ids",
            "no cron entry 'c-9'; list the entries with `nexo cron list` and use one of their ids",
        ),
        (
            "no goal 'g-4': list the goals with nexo/audit/goals/list",
            "no goal 'g-4': list the goals with `nexo agent ps --all`",
        ),
        (
            "the reason is kept in the history; memory_recall_all and my_cron_list are not tools",
            "the reason is kept in the history; memory_recall_all and my_cron_list are not tools",
        ),
    ],
)
def test_tool_and_method_names_become_the_commands_a_person_runs(
    model_facing: str, for_a_person: str
) -> None:
    assert for_person(model_facing) == for_a_person


def test_every_error_a_command_reports_is_worded_for_a_person(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("memory: there is no memory with id 7; call memory_recall to find its id") == 1
    assert capsys.readouterr().err == (
        "nexo: memory: there is no memory with id 7; run `nexo memory search` to find its id\n"
    )


def test_every_suggested_command_is_a_nexo_command() -> None:
    known = set(_commands(build_parser()))
    suggested = {
        " ".join(word for word in command.split() if not word.startswith("--"))
        for command in [*COMMAND_FOR.values(), *CALLED_ONLY.values()]
    }
    assert sorted(suggested - known) == []


def _commands(parser: argparse.ArgumentParser, prefix: str = "nexo") -> Iterator[str]:
    for action in parser._actions:  # argparse offers no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}"
                yield from _commands(sub, f"{prefix} {name}")


def test_cron_drop_of_an_unknown_entry_names_the_command_to_list_them(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "nexo.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"cron": python_server("servers.cron")},
        agent={"channels": []},
    )
    assert main(["cron", "drop", "c-missing", "--config", str(config)]) == 1
    assert capfd.readouterr().err.splitlines()[-1] == (
        "nexo: cron: no cron entry 'c-missing'; list the entries with `nexo cron list` and use one of "
        "their ids"
    )
