"""An idle memory server holds neither numpy nor the Prometheus client; the first recall brings them.

Checked in a fresh interpreter (this one imported numpy long ago): the server is started in memory
with the real local embedder on a database that already holds a memory and its vector, so nothing
at start, not even a store with vectors, may import numpy. Then a vector recall must still find
that memory, which builds the vector codes, and a new memory must be found as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from tests.servers.memory.conftest import call, connect

REPO = Path(__file__).resolve().parents[3]
LAZY = ("numpy", "prometheus_client", "servers.memory.vector_search", "servers.memory.vector_codes")

CHILD = """
import json, logging, sys
from pathlib import Path

import anyio
from mcp import Client

from servers.memory.server import build_server
from servers.memory.settings import MemorySettings
from shared.protocol.memory.meta import tool_meta

LAZY = {lazy!r}
loaded = []


class Loaded(logging.Handler):
    def emit(self, record):
        loaded.append(record.getMessage())


logging.getLogger("nexo.memory.vectors").addHandler(Loaded())
logging.getLogger("nexo.memory.vectors").setLevel(logging.INFO)


async def main():
    settings = MemorySettings(state_dir=Path(sys.argv[1]))
    meta = tool_meta("nexo", "owner")
    async with Client(build_server(settings)) as client:

        async def tool(name, **arguments):
            return (await client.call_tool(name, arguments, meta=meta)).structured_content

        at_ready = sorted(name for name in LAZY if name in sys.modules)
        old = await tool("memory_recall", query="what tea does Ana like", mode="vector")
        new = await tool("memory_remember", content="Bruno's flight lands at 18:40")
        found = await tool("memory_recall", query="when does Bruno arrive", mode="vector")
        after = sorted(name for name in LAZY if name in sys.modules)
    print(json.dumps({{
        "at_ready": at_ready,
        "after": after,
        "old": [m["content"] for m in old["memories"]],
        "new": new["status"],
        "found": [m["content"] for m in found["memories"]][:1],
        # The int8 copies' file is written by a task of its own, whose line may come either side.
        "loaded": [line for line in loaded if not line.startswith("int8 copies")],
    }}))


anyio.run(main)
"""


def test_the_server_is_ready_without_numpy_and_the_first_recall_loads_the_vector_codes(
    settings: MemorySettings, embedder: Embedder
) -> None:
    async def remember() -> None:
        async with connect(settings, embedder) as client:
            await call(client, "memory_remember", {"content": "Ana prefers green tea"}, agent="nexo")

    anyio.run(remember)
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", CHILD.format(lazy=LAZY), str(settings.state_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {
        "at_ready": [],
        "after": sorted(LAZY),
        "old": ["Ana prefers green tea"],
        "new": "stored",
        "found": ["Bruno's flight lands at 18:40"],
        "loaded": ["vector index loaded: 1 vectors of 1 agents"],
    }
