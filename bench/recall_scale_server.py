"""``python -m bench.recall_scale_server``: the memory server, embedding with recall_scale's hashed words.

The server ``python -m servers.memory`` runs (the same settings from the environment, the same
``build_server``, tools and stdio hosting), given ``HashedModel`` as its embedder instead of the
configured model: the stores of bench.recall_scale hold hashed-word vectors, and a question must be
embedded the same way to be searched against them.
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer

from bench.hashed_vectors import HashedEmbedder, HashedModel
from servers.memory.server import build_server
from servers.memory.service import MemoryService
from servers.memory.settings import MemorySettings
from shared.hosting.main import server_main


def main() -> int:
    def build() -> MCPServer[MemoryService]:
        return build_server(MemorySettings(), embedder=HashedModel(HashedEmbedder.mapped()))

    return server_main("servers.memory", build)


if __name__ == "__main__":
    sys.exit(main())
