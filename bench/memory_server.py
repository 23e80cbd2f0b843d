"""The real memory server as a client uses it: a stdio child reached with the official MCP SDK client.

Shared by the memory benchmarks: the corpus of real sentences and its embeddings (cached on disk,
built in chunks so an interrupted build resumes), a state directory, the server process and its
proportional set size (PSS) read from /proc.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
from mcp import Client, StdioServerParameters

from bench.memory_dataset import cache_dir
from bench.support import progress
from bench.text_corpus import Corpus, build
from servers.memory.embedding_local import GRAPH_REVISION, MODEL_ID, LocalEmbedder
from tests.mesh.harness import REPO, child_pids

AGENT = "bench"
EMBED_CHUNK = 2_000
CORPUS_VERSION = 1


def corpus_path(n: int) -> Path:
    return cache_dir() / f"memory-text-v{CORPUS_VERSION}-n{n}.json"


def cached_corpus(n: int) -> Corpus:
    """Up to ``n`` sentences of this machine's text (see bench/text_corpus.py), cached as JSON."""
    path = corpus_path(n)
    if path.exists():
        data = json.loads(path.read_text())
        return Corpus(data["sentences"], [(s, int(i)) for s, i in data["summaries"]])
    progress(f"memory corpus: collecting up to {n} sentences from man pages, /usr/share/doc and docstrings")
    corpus = build(n)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sentences": corpus.sentences, "summaries": corpus.summaries}))
    return corpus


def digest(sentences: list[str]) -> str:
    return hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:16]


async def cached_embeddings(sentences: list[str]) -> np.ndarray:
    """The local model's vectors of ``sentences``, computed once per chunk and kept on disk."""
    folder = cache_dir() / f"memory-vectors-{MODEL_ID}-r{GRAPH_REVISION}-{digest(sentences)}"
    folder.mkdir(parents=True, exist_ok=True)
    embedder = LocalEmbedder()
    parts: list[np.ndarray] = []
    try:
        for start in range(0, len(sentences), EMBED_CHUNK):
            chunk = sentences[start : start + EMBED_CHUNK]
            path = folder / f"{start:08d}-{digest(chunk)}.npy"
            if not path.exists():
                progress(
                    f"memory corpus: embedding sentences {start}-{start + len(chunk)} of {len(sentences)}"
                )
                vectors = await embedder.embed(chunk)
                np.save(path.with_suffix(".tmp.npy"), vectors)
                path.with_suffix(".tmp.npy").replace(path)
            parts.append(np.load(path))
    finally:
        await embedder.aclose()
    return np.concatenate(parts) if parts else np.empty((0, embedder.dim), dtype=np.float32)


def server_env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXO_")}
    env.update(
        NEXO_MEMORY_STATE_DIR=str(state),
        NEXO_MEMORY_DEFAULT_AGENT=AGENT,
        NEXO_MEMORY_EMBEDDING__IDLE_UNLOAD_S="0",
        NEXO_LOG_LEVEL="WARNING",
        **extra,
    )
    return env


@asynccontextmanager
async def memory_server(
    state: Path, module: str = "servers.memory", **extra: str
) -> AsyncIterator[tuple[Client, int | None]]:
    """The SDK client connected to ``python -m <module>`` (the memory server) over stdio, and its pid."""
    before = set(child_pids(os.getpid(), module))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", module], env=server_env(state, **extra), cwd=str(REPO)
    )
    async with Client(params) as client:
        started = [pid for pid in child_pids(os.getpid(), module) if pid not in before]
        yield client, started[0] if len(started) == 1 else None


def pss_mb(pid: int | None) -> float | None:
    """Proportional set size from /proc/<pid>/smaps_rollup (shared pages split among their users)."""
    if pid is None:
        return None
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024 / 1_048_576
    return None
