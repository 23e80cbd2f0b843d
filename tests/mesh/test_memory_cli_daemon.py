"""``nexo memory`` with ``nexo run`` up: search, list, forget, history and stats are answered by the
daemon's memory server through its control socket (no server of the command's own, no MCP SDK, no
pydantic), print what the command prints on a server of its own, and fall back to one when no daemon
runs. ``import`` keeps a server of its own, beside the daemon's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import FakeLLM, Reply
from tests.mesh.harness import nexo, python_server, running, write_config
from tests.mesh.test_cli_imports import _heavy, _traced

pytestmark = pytest.mark.scenario

RECORDS: list[dict[str, Any]] = [
    {"agent": "nexo", "content": "The operator's dog is called Rex", "kind": "fact", "tags": ["pets"]},
    {"agent": "nexo", "content": "The operator prefers green tea", "kind": "preference"},
]


def test_memory_commands_go_through_the_running_daemon(tmp_path: Path) -> None:
    lines = tmp_path / "memories.jsonl"
    lines.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    with FakeLLM(default=Reply("ok")) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "memory": python_server("servers.memory"),
            },
        )
        args = ("--config", str(config))
        with running(config):
            imported = nexo("memory", "import", str(lines), *args)
            found, found_modules = _traced("memory", "search", "dog", "--mode", "keyword", "--json", *args)
            listed, list_modules = _traced("memory", "list", "--json", *args)
            history, history_modules = _traced("memory", "history", "--json", *args)
            stats, stats_modules = _traced("memory", "stats", "--json", *args)
            shown, _ = _traced("memory", "list", *args)
            rex = next(r for r in json.loads(listed.stdout) if "Rex" in r["content"])
            forgot, forget_modules = _traced("memory", "forget", str(rex["id"]), *args)
            left = json.loads(_traced("memory", "list", "--json", *args)[0].stdout)
        on_its_own = nexo("memory", "list", "--json", *args)
        history_on_its_own = nexo("memory", "history", "--json", *args)
    assert imported.returncode == 0, imported.stderr
    for result in (found, listed, history, stats, shown, forgot):
        assert result.returncode == 0, result.stderr
    for modules in (found_modules, list_modules, history_modules, stats_modules, forget_modules):
        assert _heavy(modules) == []  # no mesh, no memory server of its own
        assert "pydantic" not in modules
    assert [m["content"] for m in json.loads(found.stdout)["memories"]] == [RECORDS[0]["content"]]
    assert sorted(r["content"] for r in json.loads(listed.stdout)) == sorted(r["content"] for r in RECORDS)
    told = json.loads(history.stdout)
    assert (told["agent"], told["revisions"]) == ("nexo", [])  # the config's first agent, named
    assert json.loads(stats.stdout)["total"] == 2
    assert [line.split()[-2:] for line in shown.stdout.splitlines()] == [["Rex", "#pets"], ["green", "tea"]]
    assert forgot.stdout.startswith(f"forgot {rex['id']:>6}  nexo  ")
    assert [r["content"] for r in left] == [RECORDS[1]["content"]]
    # With the daemon gone, a server of the command's own answers, and the output is the same.
    assert on_its_own.returncode == 0, on_its_own.stderr
    assert json.loads(on_its_own.stdout) == left
    assert json.loads(history_on_its_own.stdout) == json.loads(history.stdout)
