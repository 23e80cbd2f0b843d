"""Recall at scale on real text: latency and whether the target is found, before and after consolidation.

The store holds English sentences from the machine's own documentation (``/usr/share/doc`` and the
English man pages, split into sentences and deduplicated; extracted once and cached), one memory
each, grown to the size asked for with memories made of two sentences. In process, each memory's
vector is a hashed bag of its words, which costs nothing to embed: every word picks a fixed random
direction and a text's vector is their sum, normalised. A question sharing most of its target's
words so lands near it, as a paraphrase lands near its source for a sentence model; what this
measures is the search, not the model (the shipped server with its model is measured over MCP, below).

Rows are written straight into the memory server's tables (the same schema and the vector index's
own ``add_many``), then, once the index has written its int8 copies' file as the server does
(``servers.memory.vector_file``), each question is asked through ``Recaller``, the layer the server's
``memory_recall`` calls, with ``limit=10``. Over MCP too, the questions wait for the server's file
(its ``nexo_memory_vectors`` metric). A question is a target memory's words with a third of its
informative words left out; it scores when the target is among the ten recalled. Side by side:

- keyword recall against the keyword query of before (every word ORed, every match BM25-ranked);
- vector recall against exact search (brute force over the float32 vectors), with the share of the
  exact top ten it returns;
- hybrid recall against vector recall (what the keyword side adds);
- the same questions after a consolidation pass archived all but 5,000 memories;
- the process's PSS after the questions against the same process before it opened the store: what
  the open store holds (the vector codes, SQLite's page cache and whatever it maps).

Each mode's latency is printed twice: wall time, and the process's CPU time per question (every
thread of it, read with ``time.process_time``), which a machine shared with other work inflates far
less; print ``uptime`` beside the figures. Also per mode: how often the target comes first, and
what the process read from the disk per question (``read_bytes`` of /proc/self/io): where the page
cache does not hold the store, wall time is mostly those reads.

The database is cached under ~/.cache/nexo-bench/ (or $XDG_CACHE_HOME/nexo-bench/), keyed by size
(a store of an older schema is migrated when it is opened); a run resets what it changed
(archiving) before it ends.

Then, unless ``--no-mcp``, the same questions as ``memory_recall`` tool calls to the memory server
over stdio (``bench.recall_scale_mcp``), beside the in-process figures: first to the memory server
given the hashed words, then to the shipped one, which embeds each question with its own model, on
a second store of the same rows whose vectors are that model's. Each sentence is embedded once by
the model as an import would (``LocalEmbedder``; cached, about ten minutes for the 305k sentences of
a million rows on 2 cores), and a two-sentence memory's vector is the normalised sum of its two
sentences' vectors: close to, not the same as, the model's vector of the pair, which would cost as
much again to embed. The latency and memory targets are on the shipped server's rows, the figures
a client sees, before and after a consolidation pass; the others measure the search.
``--no-references`` skips exact search and the old keyword query, many minutes at a million.

``python -m bench.recall_scale [--rows N] [--queries Q] [--no-mcp] [--no-references]`` (default
100,000 rows, 325 questions)
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import numpy as np

from bench.hashed_vectors import DIM, HashedEmbedder, cache_dir, unit
from bench.memory_server import cached_embeddings, pss_mb
from bench.recall_scale_mcp import FILE_WAIT_S, Asked, over_mcp
from bench.stats import Result, table
from bench.support import collector_frozen, progress
from servers.memory import vector_q8
from servers.memory.consolidate import Policy, consolidate
from servers.memory.embedding_local import GRAPH_REVISION
from servers.memory.guard import SecretGuard
from servers.memory.models import content_hash
from servers.memory.notebook import Notebooks
from servers.memory.recall import Recaller
from servers.memory.state import MIGRATIONS
from servers.memory.stopwords import STOPWORDS
from servers.memory.store import MemoryStore
from servers.memory.terms import count_documents
from servers.memory.vectors import VectorIndex
from shared.db import Database
from shared.protocol.memory_terms import RecallMode

AGENT = "bench"
K = 10
VERSION = 1
WORKING_SET = 5_000
SHORT_WORDS = 4
"""Informative words of a target in a short question (``short_questions``)."""
MIN_SENTENCES = 10_000
_CHUNK = 5_000
_SOURCES = (Path("/usr/share/doc"), Path("/usr/share/man"))
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_ROFF_ESCAPE = re.compile(r"\\f[BIRP1-4]|\\\(..|\\[-&e|^]|\\s[-+]?\d")
_WORD = re.compile(r"[^\W_]+")
MODES: tuple[RecallMode, ...] = ("keyword", "vector", "hybrid")


# -- the text ------------------------------------------------------------------------------------


def _documents() -> Iterator[Path]:
    for root in _SOURCES:
        for path in sorted(root.rglob("*")):
            # English man pages only: /usr/share/man/manN/, not /usr/share/man/<lang>/manN/.
            if root.name == "man" and path.parent.parent != root:
                continue
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 2_000_000:
                yield path


def _text(path: Path) -> str:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile):
        return ""
    lines = []
    for line in raw.decode("utf-8", "ignore").splitlines():
        if line.startswith((".", "'")):
            if not line.startswith((".B ", ".I ", ".IR ", ".BR ", ".RB ", ".RI ")):
                continue
            line = line.split(" ", 1)[1]
        lines.append(_ROFF_ESCAPE.sub("", line))
    return " ".join(" ".join(lines).split())


def sentences() -> list[str]:
    """Distinct English sentences of 5 to 40 words, mostly letters, from the local documentation."""
    cached = cache_dir() / f"recall-scale-sentences-v{VERSION}.txt"
    if cached.exists():
        return cached.read_text().splitlines()
    progress("recall scale: extracting sentences from /usr/share/doc and /usr/share/man (once, cached)")
    found: set[str] = set()
    for path in _documents():
        for sentence in _SENTENCE.split(_text(path)):
            words = len(sentence.split())
            if 5 <= words <= 40 and sum(c.isalpha() for c in sentence) > 0.6 * len(sentence):
                found.add(sentence)
    ordered = sorted(found)
    if len(ordered) < MIN_SENTENCES:
        raise RuntimeError(
            f"only {len(ordered):,} English sentences found under /usr/share/doc and /usr/share/man; "
            f"this benchmark needs {MIN_SENTENCES:,} (a machine without documentation, e.g. a slim image)"
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text("\n".join(ordered))
    return ordered


def corpus(pool_size: int, rows: int, seed: int = 7) -> list[tuple[int, int | None]]:
    """``rows`` distinct memories as indexes into the pool: every sentence once (shuffled), then
    distinct pairs of sentences."""
    rng = np.random.default_rng(seed)
    chosen: list[tuple[int, int | None]] = [(int(i), None) for i in rng.permutation(pool_size)[:rows]]
    pairs: dict[tuple[int, int], None] = {}
    while len(chosen) + len(pairs) < rows:
        a, b = (int(x) for x in rng.integers(pool_size, size=2))
        if a != b:
            pairs[a, b] = None
    return chosen + list(pairs)


def text_of(pool: Sequence[str], row: tuple[int, int | None]) -> str:
    first, second = row
    return pool[first] if second is None else f"{pool[first]} {pool[second]}"


# -- the vectors ---------------------------------------------------------------------------------


async def _hashed_sums(pool: Sequence[str], embedder: HashedEmbedder) -> np.ndarray:
    return sentence_sums(pool, embedder)


def sentence_sums(pool: Sequence[str], embedder: HashedEmbedder) -> np.ndarray:
    """The summed word directions of every sentence of the pool (computed once, cached)."""
    cached = cache_dir() / f"recall-scale-sums-v{VERSION}-{len(pool)}.npy"
    if cached.exists():
        return np.asarray(np.load(cached), dtype=np.float32)
    progress(f"recall scale: hashing the words of {len(pool):,} sentences (once, cached)")
    sums = np.concatenate([embedder.sums(pool[i : i + _CHUNK]) for i in range(0, len(pool), _CHUNK)])
    np.save(cached, sums)
    return sums


# -- the store -----------------------------------------------------------------------------------


async def _build(
    path: Path, pool: Sequence[str], rows: Sequence[tuple[int, int | None]], sums: np.ndarray
) -> None:
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(Database.open(path, MIGRATIONS, load_vec=True))
        index = VectorIndex(db, DIM)
        await index.load()
        started = time.perf_counter()
        for first in range(0, len(rows), _CHUNK):
            chunk_rows = rows[first : first + _CHUNK]
            chunk = [text_of(pool, row) for row in chunk_rows]
            vectors = unit(np.stack([sums[a] if b is None else sums[a] + sums[b] for a, b in chunk_rows]))
            ids = range(first + 1, first + 1 + len(chunk))
            async with db.transaction() as tx:
                await tx.executemany(
                    "INSERT INTO memories (id, agent, content, content_sha256, kind, provenance, importance, "
                    "created_at, last_accessed_at) VALUES (?, ?, ?, ?, 'note', 'owner', 0.5, ?, ?)",
                    [
                        (i, AGENT, text, content_hash(text), 1_700_000_000.0 + i, 1_700_000_000.0 + i)
                        for i, text in zip(ids, chunk, strict=True)
                    ],
                )
                await count_documents(tx, added=[(text, "[]") for text in chunk])
                await index.add_many(tx, [(i, AGENT, v) for i, v in zip(ids, vectors, strict=True)])
            if first // _CHUNK % 20 == 0:
                progress(
                    f"recall scale: {first + len(chunk):,} of {len(rows):,} rows "
                    f"({time.perf_counter() - started:.0f} s)"
                )


async def upgraded(db: Database) -> None:
    """Build the int8 copies a cached store of an older version lacks, as a memory server does in
    the background once it is up, before anything is measured (once: they are kept)."""
    started = time.perf_counter()
    built = await vector_q8.backfill(db)
    if built:
        progress(
            f"recall scale: built the int8 copies of {built:,} vectors of a store of an older version "
            f"in {time.perf_counter() - started:.1f} s (once)"
        )


async def cached_database(
    pool: Sequence[str],
    rows: Sequence[tuple[int, int | None]],
    vectors: Callable[[], Awaitable[np.ndarray]],
    kind: str = "",
) -> Path:
    """The store of ``rows``, built once (cached); ``vectors``: a sentence's vector by its index in
    the pool (a two-sentence memory's is their sum, normalised), asked for only to build it."""
    # Not keyed by schema: a store of an older schema is migrated when opened, as a server's is.
    path = cache_dir() / f"recall-scale-{len(rows)}-v{VERSION}{kind}.db"
    if not path.exists():
        partial = path.with_suffix(".partial")
        for leftover in partial.parent.glob(partial.name + "*"):
            leftover.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        await _build(partial, pool, rows, await vectors())
        partial.rename(path)
    return path


async def model_sentence_vectors(pool: Sequence[str], rows: Sequence[tuple[int, int | None]]) -> np.ndarray:
    """The shipped local model's vector of each sentence ``rows`` use (zero for the others), embedded
    once by `LocalEmbedder` as an import would and cached (``bench.memory_server.cached_embeddings``):
    a store whose vectors are the model's."""
    used = np.unique([index for row in rows for index in row if index is not None])
    vectors = np.zeros((len(pool), DIM), dtype=np.float32)
    vectors[used] = await cached_embeddings([pool[i] for i in used])
    return vectors


# -- the questions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    target: int


def questions(texts: Sequence[str], n: int, seed: int = 13) -> list[Question]:
    """Per target, its words with a third of the informative ones left out (at least two kept)."""
    rng = np.random.default_rng(seed)
    asked: list[Question] = []
    while len(asked) < n:
        target = int(rng.integers(len(texts)))
        words = _WORD.findall(texts[target])
        informative = [i for i, word in enumerate(words) if word.casefold() not in STOPWORDS]
        if len(informative) < 3:
            continue
        dropped = set(rng.choice(informative, size=len(informative) // 3, replace=False).tolist())
        asked.append(Question(" ".join(w for i, w in enumerate(words) if i not in dropped), target + 1))
    return asked


def short_questions(texts: Sequence[str], n: int, seed: int = 17) -> list[Question]:
    """Per target, ``SHORT_WORDS`` of its informative words in their order: a question as short as
    the search query a model writes, whose embedding costs the model less than a long one's."""
    rng = np.random.default_rng(seed)
    asked: list[Question] = []
    while len(asked) < n:
        target = int(rng.integers(len(texts)))
        words = [word for word in _WORD.findall(texts[target]) if word.casefold() not in STOPWORDS]
        if len(words) < SHORT_WORDS:
            continue
        kept = sorted(rng.choice(len(words), size=SHORT_WORDS, replace=False).tolist())
        asked.append(Question(" ".join(words[i] for i in kept), target + 1))
    return asked


def old_keyword_match(text: str) -> str | None:
    """The keyword query of before: every distinct word but stopwords (all of them if nothing else), ORed."""
    words = list(dict.fromkeys(_WORD.findall(text.casefold())))
    chosen = [w for w in words if w not in STOPWORDS] or words
    return " OR ".join(f'"{w}"' for w in chosen[:32]) or None


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Pass:
    latency: dict[RecallMode, list[float]]
    cpu: dict[RecallMode, list[float]]
    found: dict[RecallMode, list[bool]]
    first: dict[RecallMode, list[bool]]
    disk_kb: dict[RecallMode, float | None]
    """Per question, what the process read from the disk (not the page cache), when Linux says."""


def disk_read_bytes() -> int | None:
    """Bytes this process has read from storage (/proc/self/io ``read_bytes``), None where unknown."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return None


async def _ask(recaller: Recaller, asked: Sequence[Question]) -> Pass:
    result = Pass(
        {m: [] for m in MODES}, {m: [] for m in MODES}, {m: [] for m in MODES}, {m: [] for m in MODES}, {}
    )
    for mode in MODES:
        read_before = disk_read_bytes()
        with collector_frozen():  # the benchmark's corpus: its collections are not the recall's time
            for question in asked:
                started, cpu = time.perf_counter(), time.process_time()
                recalled = await recaller.recall(AGENT, question.text, mode=mode, limit=K, touch=False)
                result.latency[mode].append((time.perf_counter() - started) * 1000)
                result.cpu[mode].append((time.process_time() - cpu) * 1000)
                ids = [m.id for m in recalled.memories]
                result.found[mode].append(question.target in ids)
                result.first[mode].append(ids[:1] == [question.target])
        read_after = disk_read_bytes()
        result.disk_kb[mode] = (
            None
            if read_before is None or read_after is None
            else (read_after - read_before) / 1024 / len(asked)
        )
    return result


async def _old_keyword(store: MemoryStore, asked: Sequence[Question]) -> tuple[list[float], list[bool]]:
    latency, found = [], []
    for question in asked:
        match = old_keyword_match(question.text)
        started = time.perf_counter()
        rows = await store.db.fetchall(
            "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories AS m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? AND m.agent = ? "
            "ORDER BY score DESC LIMIT ?",
            (match, AGENT, 3 * K),
        )
        latency.append((time.perf_counter() - started) * 1000)
        found.append(question.target in [int(row[0]) for row in rows[:K]])
    return latency, found


async def _exact(
    index: VectorIndex, embedder: HashedEmbedder, asked: Sequence[Question]
) -> tuple[list[float], list[float]]:
    """Exact search's latency, and the share of its top ten that the index's search returns."""
    latency, agreement = [], []
    for question in asked:
        query = embedder.embed([question.text])[0]
        started = time.perf_counter()
        exact = await index.search(AGENT, query, K, exact=True)
        latency.append((time.perf_counter() - started) * 1000)
        approximate = await index.search(AGENT, query, K)
        agreement.append(len({i for i, _ in exact} & {i for i, _ in approximate}) / K)
    return latency, agreement


async def run(rows: int, n_questions: int, *, mcp: bool = True, references: bool = True) -> list[Result]:
    size = f"{rows // 1000}k" if rows < 1_000_000 else f"{rows / 1e6:g}M"
    label = f"{size} real sentences"
    embedder = HashedEmbedder()
    pool = sentences()
    chosen = corpus(len(pool), rows)
    texts = [text_of(pool, row) for row in chosen]
    asked, short = questions(texts, n_questions), short_questions(texts, n_questions)
    del texts
    path = await cached_database(pool, chosen, partial(_hashed_sums, pool, embedder))
    # The shipped server's store: the same rows with the model's vectors (built before anything is
    # timed, as it takes minutes the first time).
    modelled = None
    if mcp:
        model_vectors = partial(model_sentence_vectors, pool, chosen)
        modelled = await cached_database(pool, chosen, model_vectors, f"-model-r{GRAPH_REVISION}")
    results: list[Result] = []
    pss_before = pss_mb(os.getpid())
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(Database.open(path, MIGRATIONS, load_vec=True))
        await upgraded(db)
        index = VectorIndex(db, DIM)
        started = time.perf_counter()
        await index.load()
        progress(
            f"recall scale: {rows:,} rows ({len(pool):,} distinct sentences), "
            f"index loaded in {time.perf_counter() - started:.1f} s"
        )
        # As the memory server does: the int8 copies in a file (servers.memory.vector_file).
        copies = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(copies.cancel_scope.cancel)
        copies.start_soon(index.keep_filed)
        started = time.perf_counter()
        with anyio.fail_after(FILE_WAIT_S):
            await index.until_filed()
        progress(f"recall scale: int8 copies in their file in {time.perf_counter() - started:.1f} s")
        reader = await stack.enter_async_context(db.reader())
        store = MemoryStore(db, index, reader=reader)
        recaller = Recaller(store, embedder.embed_one)
        await _ask(recaller, asked[:20])  # warm the page cache
        before = await _ask(recaller, asked)
        pss_after = pss_mb(os.getpid())
        old_latency: list[float] = []
        old_found: list[bool] = []
        exact_latency: list[float] = []
        agreement: list[float] = []
        if references:
            old_latency, old_found = await _old_keyword(store, asked)
            exact_latency, agreement = await _exact(index, embedder, asked)
        try:
            with_notebooks = Notebooks(
                path.parent / "notebooks", guard=SecretGuard("block"), budget_bytes=16_384
            )
            started = time.perf_counter()
            report = await consolidate(
                store,
                with_notebooks,
                AGENT,
                policy=Policy(working_set_max=WORKING_SET, promote_max=0),
                now=time.time(),
            )
            progress(
                f"recall scale: consolidation archived {report.archived_count:,} of {report.scored:,} "
                f"in {time.perf_counter() - started:.1f} s"
            )
            after = await _ask(recaller, asked)
        finally:
            await db.execute("UPDATE memories SET archived = 0 WHERE archived = 1")

    def latency(mode: RecallMode, baseline_name: str, baseline: list[float]) -> Result:
        # The search in process with hashed words: the targets are the shipped server's rows.
        return Result(
            f"memory recall {mode}, {label} (k={K})", "ms", baseline_name, before.latency[mode], baseline
        )

    def share(values: Sequence[bool | float]) -> list[float]:
        return [float(np.mean(values))] if values else []

    def cpu(mode: RecallMode) -> Result:
        return Result(
            f"memory recall {mode}, CPU time per question, {label}",
            "ms",
            "its wall time",
            before.cpu[mode],
            before.latency[mode],
        )

    results += [
        latency("keyword", "every word ORed, every match ranked (before)", old_latency),
        Result(
            f"memory recall keyword, target in top {K}, {label}",
            "",
            "every word ORed (before)",
            share(before.found["keyword"]),
            share(old_found),
        ),
        latency("vector", "exact search (brute force)", exact_latency),
        # Measured only with the references (exact search over every vector): not a row of errors.
        *(
            [
                Result(
                    f"memory recall vector, top {K} agreeing with exact, {label}",
                    "",
                    "exact search (1.0)",
                    share(agreement),
                    [1.0],
                )
            ]
            if agreement
            else []
        ),
        latency("hybrid", "vector recall alone", before.latency["vector"]),
        *(cpu(mode) for mode in MODES),
        *(
            Result(
                f"memory recall {mode}, target first, {label}",
                "",
                "target in top 10",
                share(before.first[mode]),
                share(before.found[mode]),
            )
            for mode in MODES
        ),
    ]
    for mode in MODES:
        disk_kb = before.disk_kb[mode]
        if disk_kb is None:
            progress("recall scale: /proc/self/io is not readable here: no disk reads per question")
            break
        results.append(
            Result(
                f"memory recall {mode}, read from the disk per question, {label}",
                "KB",
                "-",
                [disk_kb],
            )
        )
    if pss_before is not None and pss_after is not None:
        results.append(
            Result(
                f"memory recall process PSS after the questions, {label}",
                "MB",
                "the same process before opening the store",
                [pss_after],
                [pss_before],
            )
        )
    for mode in MODES:
        results.append(
            Result(
                f"memory recall {mode}, target in top {K} after consolidation, {label}",
                "",
                "the same before consolidation",
                share(after.found[mode]),
                share(before.found[mode]),
            )
        )
    if modelled is not None:
        results += await over_mcp(
            (path, modelled),
            AGENT,
            [Asked(q.text, q.target) for q in asked],
            MODES,
            before.latency,
            label,
            K,
            [Asked(q.text, q.target) for q in short],
        )
    return results


def measure(quick: bool) -> list[Result]:
    return anyio.run(run, 20_000 if quick else 100_000, 100 if quick else 325)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_scale", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000, help="memories in the store (default 100,000)")
    parser.add_argument("--queries", type=int, default=325, help="questions asked (default 325)")
    parser.add_argument(
        "--no-mcp",
        action="store_true",
        help="skip asking the questions over MCP (a server on a copy of the store: its size again on disk)",
    )
    parser.add_argument(
        "--no-references",
        action="store_true",
        help="skip exact search and the old keyword query (their baselines; many minutes at a million)",
    )
    args = parser.parse_args()
    measured = partial(run, args.rows, args.queries, mcp=not args.no_mcp, references=not args.no_references)
    print(table(anyio.run(measured)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
