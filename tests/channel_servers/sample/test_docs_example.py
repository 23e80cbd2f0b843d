"""docs/adding-a-channel.md cannot rot: its code blocks are the example's files, and the example runs.

The example's own tests (docs/examples/chirp/test_chirp.py) are imported here, so pytest runs them
as part of the suite.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import textwrap
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters

from docs.examples.chirp.test_chirp import (  # noqa: F401 -- collected and run by pytest from here
    test_a_message_chirp_refuses_is_reported_to_the_model,
    test_a_reply_is_posted_once_however_often_it_is_retried,
    test_a_webhook_message_becomes_one_durable_event,
    test_while_chirp_is_down_a_reply_waits_for_the_chat_to_write_again,
)
from orchestrator.config.loading import load
from shared.protocol.events import PullParams, PullRequest, PullResult
from tests.mesh.harness import REPO

GUIDE = REPO / "docs" / "adding-a-channel.md"
EXAMPLE = REPO / "docs" / "examples" / "chirp"
MARKER = re.compile(r"^<!-- file: (?P<path>[\w./-]+?)(?:#(?P<region>[\w-]+))? -->$")
REGION = re.compile(r"^\s*# --8<-- \[(?P<edge>start|end):(?P<name>[\w-]+)\]$")


def code_blocks(text: str) -> list[tuple[str | None, str]]:
    """(the line above the opening fence, the block's content) for every fenced block."""
    blocks: list[tuple[str | None, str]] = []
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        if lines[index].startswith("```"):
            above = lines[index - 1].strip() if index > 0 else None
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            blocks.append((above, "".join(lines[index + 1 : end])))
            index = end
        index += 1
    return blocks


def region(path: Path, name: str) -> str:
    lines = path.read_text().splitlines(keepends=True)
    start = lines.index(next(line for line in lines if line.strip() == f"# --8<-- [start:{name}]"))
    end = lines.index(next(line for line in lines if line.strip() == f"# --8<-- [end:{name}]"))
    return textwrap.dedent("".join(lines[start + 1 : end])).strip("\n") + "\n"


def shown(above: str | None) -> tuple[Path, str | None]:
    match = MARKER.match(above or "")
    assert match is not None, f"a code block must have <!-- file: PATH[#region] --> above it, not {above!r}"
    return REPO / match["path"], match["region"]


def test_every_code_block_in_the_guide_is_a_file_of_the_example() -> None:
    blocks = code_blocks(GUIDE.read_text())
    for above, content in blocks:
        path, name = shown(above)
        expected = path.read_text() if name is None else region(path, name)
        assert content == expected, f"{above}: the guide's block differs from the file; copy the file's text"
    assert len(blocks) >= 10


def test_the_guide_shows_every_example_file_and_region() -> None:
    targets = {shown(above) for above, _ in code_blocks(GUIDE.read_text())}
    wanted: set[tuple[Path, str | None]] = set()
    for path in sorted(EXAMPLE.iterdir()):
        if path.suffix not in (".py", ".yaml", ".sh") or path.name == "__init__.py":
            continue
        names = {
            m["name"] for m in map(REGION.match, path.read_text().splitlines()) if m and m["edge"] == "start"
        }
        wanted |= {(path, name) for name in names} if names else {(path, None)}
    assert sorted(map(str, wanted - targets)) == []


def test_a_block_without_its_file_marker_is_caught() -> None:
    with pytest.raises(AssertionError, match="must have <!-- file"):
        shown(code_blocks("text\n```python\nprint()\n```\n")[0][0])


def test_the_guides_config_file_is_a_valid_nexo_config() -> None:
    config = load(EXAMPLE / "agents.yaml", env={"CHIRP_SECRET": "from-env", "NEXO_PYTHON": sys.executable})
    chirp = config.servers["chirp"]
    assert (chirp.transport, getattr(chirp, "args", None)) == ("stdio", ["-m", "docs.examples.chirp"])
    assert getattr(chirp, "env", {})["NEXO_CHIRP_SECRET"] == "from-env"
    assert [(entry.server, entry.plugin_source) for entry in config.channels.approved] == [
        ("console", None),
        ("chirp", "chirp"),
    ]
    assert config.agents[0].channels == ["console", "chirp"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.anyio
async def test_the_example_runs_alone_over_stdio_as_the_guide_says(tmp_path: Path) -> None:
    assert "python -m docs.examples.chirp\n" in (EXAMPLE / "run.sh").read_text()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update(
        {
            "NEXO_STATE_DIR": str(tmp_path),
            "NEXO_CHIRP_API_URL": "http://127.0.0.1:9/api",
            "NEXO_CHIRP_SECRET": "stdio-key",
            "NEXO_CHIRP_PORT": str(port),
        }
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "docs.examples.chirp"], env=env, cwd=str(REPO)
    )
    body = {"message_id": "m1", "chat_id": "c1", "sender": "ana", "text": "over stdio"}
    with anyio.fail_after(60):
        async with Client(params) as client, httpx2.AsyncClient() as http:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            response = await http.post(
                f"http://127.0.0.1:{port}/chirp",
                content=json.dumps(body),
                headers={"x-chirp-secret": "stdio-key"},
            )
            pulled = await client.session.send_request(
                PullRequest(params=PullParams(wait_ms=5000)), PullResult
            )
            queued = await client.call_tool("send_message", {"text": "back", "chat_id": "c1"})
    assert tools == ["send_message"]
    assert response.status_code == 200
    assert [event.payload["content"] for event in pulled.events] == ["over stdio"]
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"  # nothing listens on port 9: unreachable
    assert (tmp_path / "chirp" / "chirp.db").exists()
