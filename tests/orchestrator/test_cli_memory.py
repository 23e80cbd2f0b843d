"""``nexo memory ...`` against a real memory server process (HTTP for most tests, stdio for two)."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2
import numpy as np
import numpy.typing as npt
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator.cli.memory_args import add_memory_parser
from orchestrator.cli.memory_view import command_memory
from orchestrator.cli.progress import ProgressBar
from servers.memory.reindex import recorded_model
from servers.memory.settings import MemorySettings
from servers.memory.state import open_database, open_service
from shared.protocol.memory.meta import tool_meta
from tests.http_server import http_server

HTTP_TOKEN = "memory-cli-test-token"


def child_env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXO_")}
    env.update({"NEXO_MEMORY_STATE_DIR": str(state), "NEXO_LOG_LEVEL": "INFO", **extra})
    return env


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One memory server over HTTP for the module; each test works on agents of its own."""
    with http_server("servers.memory", tmp_path_factory.mktemp("memory-http"), HTTP_TOKEN) as url:
        yield url


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # The command installs its own stderr handler on the root logger, as the real CLI does.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def write_config(tmp_path: Path, server: dict[str, Any] | None, agent: str = "nexo") -> Path:
    if server is not None and server.get("transport") == "http":
        server = {"token": HTTP_TOKEN, **server}
    config = {
        "state_dir": str(tmp_path / "state"),
        "servers": {} if server is None else {"memory": server},
        "llm": {
            "providers": {
                "fake": {"kind": "openai_compat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
            }
        },
        "agents": [{"id": agent, "model": {"provider": "fake"}}],
        "supervision": {"initial_backoff_s": 0.05, "max_backoff_s": 0.5},
    }
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def nexo_memory(config: Path, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="nexo")
    add_memory_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["memory", argv[0], "--config", str(config), *argv[1:]])
    return command_memory(args)


def records_file(tmp_path: Path, agent: str, contents: list[str], extra_lines: tuple[str, ...] = ()) -> Path:
    path = tmp_path / "in.jsonl"
    lines = [json.dumps({"agent": agent, "content": c, "tags": ["t"], "kind": "fact"}) for c in contents]
    path.write_text("\n".join([*lines, *extra_lines]) + "\n")
    return path


FACTS = ["Ana prefers green tea", "Bob's car is a blue Renault", "The cat is named Miso"]


def test_import_search_list_and_export_round_trip_over_http(
    tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="roundtrip")
    contents = FACTS + [f"Garden note number {i}" for i in range(102)]
    assert nexo_memory(config, "import", str(records_file(tmp_path, "roundtrip", contents))) == 0
    imported = capsys.readouterr()
    assert nexo_memory(config, "search", "what does Ana drink", "--limit", "1", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "list", "--agent", "roundtrip", "--json", "--limit", "0") == 0
    listed = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "list", "--agent", "roundtrip") == 0
    by_default = capsys.readouterr()
    assert nexo_memory(config, "list", "--agent", "roundtrip", "--limit", "3", "--json") == 0
    first_three = capsys.readouterr()
    out = tmp_path / "out.jsonl"
    assert nexo_memory(config, "export", "--agent", "roundtrip", "--output", str(out)) == 0
    exported = capsys.readouterr()
    assert imported.err.splitlines()[-1] == "imported 105, refreshed 0 already known, rejected 0"
    assert [line.split(" (")[0] for line in imported.err.splitlines()[:-1]] == [
        "importing 100/105",
        "importing 105/105",
    ]
    assert (found["mode"], [m["content"] for m in found["memories"]]) == ("hybrid", [FACTS[0]])
    assert [(m["agent"], m["content"], m["kind"], m["tags"]) for m in listed] == [
        ("roundtrip", content, "fact", ["t"]) for content in contents
    ]
    assert [json.loads(line) for line in out.read_text().splitlines()] == listed
    assert len(by_default.out.splitlines()) == 100
    assert by_default.err == "5 more not shown; raise --limit (0 shows all) or use `nexo memory export`\n"
    assert json.loads(first_three.out) == listed[:3]
    assert first_three.err == "102 more not shown; raise --limit (0 shows all) or use `nexo memory export`\n"
    assert [line.split(" (")[0] for line in exported.err.splitlines()] == [
        "exporting 100/105",
        "exporting 105/105",
        "exported 105 memories",
    ]


def test_human_output_of_list_forget_and_export_to_stdout(
    tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="human")
    assert nexo_memory(config, "list", "--agent", "human") == 0
    empty = capsys.readouterr()
    nexo_memory(config, "import", str(records_file(tmp_path, "human", ["Lunch is at noon", "x " * 80])))
    capsys.readouterr()
    assert nexo_memory(config, "list", "--agent", "human", "--kind", "fact") == 0
    listed = capsys.readouterr().out.splitlines()
    assert nexo_memory(config, "export", "--agent", "human") == 0
    exported = capsys.readouterr()
    first_id = json.loads(exported.out.splitlines()[0])["id"]
    assert nexo_memory(config, "forget", str(first_id)) == 0
    forgot = capsys.readouterr().out
    assert (empty.out, empty.err) == ("", "no memories\n")
    assert [line.split("fact/owner  ")[1] for line in listed] == [
        "Lunch is at noon  #t",
        "x " * 49 + "x…  #t",
    ]
    assert [json.loads(line)["content"] for line in exported.out.splitlines()] == [
        "Lunch is at noon",
        ("x " * 80).strip(),
    ]
    assert exported.err == "exported 2 memories\n"
    assert forgot.startswith("forgot ")
    assert forgot.rstrip().endswith("Lunch is at noon  #t")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("search", "tea", "--limit", "0"), "nexo: --limit 0 is out of range; use 1 to 50\n"),
        (("reindex", "--batch-size", "600"), "nexo: --batch-size 600 is out of range; use 1 to 512\n"),
        (("history", "--limit", "0"), "nexo: --limit 0 is out of range; use 1 to 1000\n"),
        (("list", "--limit", "-1"), "nexo: --limit -1 is out of range; use 0 (all) or more\n"),
    ],
)
def test_out_of_range_options_fail_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    assert nexo_memory(write_config(tmp_path, None), *argv) == 1
    assert capsys.readouterr().err == message


def test_the_progress_bar_redraws_one_line_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    bar = ProgressBar("importing", 4, stream=screen)
    bar.update(2)
    bar.update(4)
    bar.close()
    frames = screen.getvalue().split("\r\x1b[K")
    assert [frame.split(" (")[0] for frame in frames] == ["", "importing 2/4", "importing 4/4"]
    assert screen.getvalue().endswith("\n")


def test_the_human_listing_shows_one_line_per_memory(
    tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="lines")
    nexo_memory(config, "import", str(records_file(tmp_path, "lines", FACTS[:1])))
    capsys.readouterr()
    assert nexo_memory(config, "search", "green tea", "--mode", "keyword") == 0
    searched = capsys.readouterr().out.splitlines()
    assert nexo_memory(config, "search", "nothing like this at all", "--mode", "keyword") == 0
    empty = capsys.readouterr()
    assert len(searched) == 1
    assert searched[0].split()[1:2] == ["lines"]
    assert searched[0].endswith("fact/owner  Ana prefers green tea  #t")
    assert (empty.out, empty.err) == ("", "no memories match\n")


def test_import_lists_rejected_lines_and_exits_2(
    tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="rejects")
    path = records_file(
        tmp_path, "rejects", ["A fine memory"], ("{not json", json.dumps({"agent": "rejects"}))
    )
    path.write_text(path.read_text() + json.dumps({"agent": "rejects", "content": "x" * 9000}) + "\n")
    assert nexo_memory(config, "import", str(path), "--json") == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    report = json.loads(captured.out)
    assert (report["imported"], report["refreshed"], len(report["rejected"])) == (1, 0, 3)
    assert not any(line.startswith("importing") for line in err)
    assert err[-1] == "imported 1, refreshed 0 already known, rejected 3"
    assert [line.split(":")[0] for line in err if line.startswith("rejected line")] == [
        "rejected line 2",
        "rejected line 3",
        "rejected line 4",
    ]
    assert "content is 9000 bytes; the limit is 8192 bytes" in err[-2]


def test_forget_deletes_and_an_unknown_id_fails_with_exit_1(
    tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="forgets")
    nexo_memory(config, "import", str(records_file(tmp_path, "forgets", ["Forget me soon"])))
    capsys.readouterr()
    nexo_memory(config, "list", "--agent", "forgets", "--json")
    (memory,) = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "forget", str(memory["id"]), "--json") == 0
    forgotten = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "forget", str(memory["id"])) == 1
    failed = capsys.readouterr().err
    assert forgotten["content"] == "Forget me soon"
    assert failed == (
        f"nexo: there is no memory with id {memory['id']}; run `nexo memory search` to find the id of a "
        "memory\n"
    )


def test_stats_and_rollback(tmp_path: Path, http_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {"transport": "http", "url": http_url}, agent="notes")

    async def write_notes() -> str:
        headers = {"Authorization": f"Bearer {HTTP_TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(http_url, http_client=http)) as client,
        ):
            meta = tool_meta("notes", "owner")
            first = await client.call_tool(
                "memory_note",
                {"op": "append", "section": "People", "text": "Ana"},
                meta=meta,
            )
            await client.call_tool(
                "memory_note", {"op": "append", "section": "People", "text": "Bob"}, meta=meta
            )
            assert first.structured_content is not None
            return str(first.structured_content["rev"])

    rev = anyio.run(write_notes)
    assert nexo_memory(config, "history", "--agent", "notes") == 0
    history = capsys.readouterr().out.splitlines()
    assert nexo_memory(config, "rollback", rev[:10], "--json") == 0
    rolled = capsys.readouterr()
    assert nexo_memory(config, "history", "--agent", "notes", "--limit", "1", "--json") == 0
    newest = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "rollback", "feedbeef") == 1
    unknown = capsys.readouterr().err
    assert nexo_memory(config, "stats", "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    assert nexo_memory(config, "stats") == 0
    human = capsys.readouterr().out
    assert [line.split("  ", 2)[::2] for line in history] == [
        [history[0][:12], "append: Bob"],
        [rev[:12], "append: Ana"],
    ]
    restored = json.loads(rolled.out)
    assert (restored["agent"], restored["restored_from"], restored["content"]) == (
        "notes",
        rev[:10],
        "## People\n\n- Ana\n",
    )
    assert rolled.err.startswith(f"MEMORY.md of agent notes restored from {rev[:10]} as revision ")
    assert (newest["agent"], newest["content"], len(newest["revisions"])) == ("notes", restored["content"], 1)
    assert newest["revisions"][0]["rev"] == restored["rev"]
    assert unknown == (
        "nexo: unknown revision 'feedbeef' of MEMORY.md for agent 'notes'; run `nexo memory history` to "
        "list revisions and pass one of their rev values\n"
    )
    assert stats["embedder"]["reindex_needed"] is False
    assert stats["total"] == sum(stats["by_agent"].values())
    lines = human.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("embedder"))
    assert lines[at] == "embedder      all-MiniLM-L6-v2-onnx-int8 (384 dims)"
    assert lines[at + 1].startswith("recalls       ")
    assert set(stats["metrics"]) == {"recall", "memories", "vectors", "import"}


def test_a_config_without_a_memory_server_is_refused_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nexo_memory(write_config(tmp_path, None), "stats") == 1
    assert capsys.readouterr().err == (
        "nexo: the config has no server named 'memory'; add one under servers: "
        "(transport: stdio, command: python, args: [-m, servers.memory])\n"
    )


def test_an_unreadable_import_file_fails_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nexo_memory(write_config(tmp_path, None), "import", str(tmp_path / "missing.jsonl")) == 1
    assert capsys.readouterr().err.startswith(f"nexo: cannot read {tmp_path / 'missing.jsonl'}: ")


def test_a_server_that_cannot_start_fails_the_command_at_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    server = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "servers.memory"],
        "env": {"NEXO_MEMORY_GUARD_MODE": "loud"},
    }
    assert nexo_memory(write_config(tmp_path, server), "stats") == 1
    assert (
        capfd.readouterr()
        .err.splitlines()[-1]
        .startswith(f"nexo: the memory server ({sys.executable} -m servers.memory) did not start: ")
    )


def test_reindex_over_stdio_moves_every_memory_to_the_configured_model(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = MemorySettings(state_dir=tmp_path / "state")
    old = OldModel()

    async def seed() -> None:
        async with open_service(settings, embedder=old) as service:
            for fact in FACTS:
                await service.remember("nexo", "owner", fact)

    anyio.run(seed)
    stdio = {"transport": "stdio", "command": sys.executable, "args": ["-m", "servers.memory"]}
    maintenance = write_config(tmp_path, {**stdio, "env": {"NEXO_MEMORY_ALLOW_MODEL_MISMATCH": "true"}})
    assert nexo_memory(maintenance, "stats") == 2
    stats = capfd.readouterr().out.splitlines()
    config = write_config(tmp_path, stdio)
    assert nexo_memory(config, "reindex", "--batch-size", "2", "--json") == 0
    reindexed = capfd.readouterr()
    err = reindexed.err.splitlines()

    async def model() -> tuple[str, int] | None:
        async with open_database(settings) as db:
            return await recorded_model(db)

    assert anyio.run(model) == ("all-MiniLM-L6-v2-onnx-int8", 384)
    assert [line for line in err if line.startswith("reindexing")] == []
    assert json.loads(reindexed.out) == {"reindexed": 3, "model_id": "all-MiniLM-L6-v2-onnx-int8", "dim": 384}
    assert err[-1] == "reindexed 3 memories with all-MiniLM-L6-v2-onnx-int8 (384 dims)"
    assert stats[-1] == "              the index holds old-model vectors: run `nexo memory reindex`"


class OldModel:
    """A stand-in for the model the memories were first embedded with: 8 dimensions, no meaning."""

    model_id = "old-model"
    dim = 8

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.ones((len(texts), self.dim), dtype=np.float32)
        unit: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return unit
