"""Import throughput beside the embedder's own ceiling, on the same real sentences.

End to end: the records go to the real memory server over stdio with the official MCP SDK client
as `nexo memory import` sends them (`nexo/memory/import`, 100 records per request, one after the
other, so the records keep the file's order), after one warm-up record so the model is loaded;
each request is checked, embedded and stored in one transaction. Timed in groups of 400 records.

Ceiling: ONNX Runtime alone, in this process, right after each group, on the very batches the
server makes of the same sentences (same model, same session options, same tokenization and
batching: `LocalEmbedder.infer_each` over `batching.batches`, as many runs at once), with nothing
before or after. The goal is an import at 80 % of the ceiling or better; the share row says where
it stands.

Records: 2,000 by default (500 with --quick); `--size N` for more.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from bench.memory_server import cached_corpus, memory_server
from bench.stats import Result
from bench.support import describe, progress
from orchestrator.cli.memory import IMPORT_BATCH
from servers.memory.batching import batches
from servers.memory.embedding_local import LocalEmbedder
from shared.protocol.memory.admin import ImportParams, ImportRequest, ImportResult
from shared.protocol.memory.records import ImportRecord

DEFAULT_RECORDS = 2_000
QUICK_RECORDS = 500
AGENT = "import"
GROUP = 4 * IMPORT_BATCH
"""Records per timed sample."""


async def _ceiling_ms_per_record(embedder: LocalEmbedder, group: list[str]) -> float:
    begun = time.perf_counter()
    for first in range(0, len(group), IMPORT_BATCH):
        made = list(
            batches(await embedder.tokenize(group[first : first + IMPORT_BATCH]), embedder.batch_size)
        )
        await embedder.infer_each(made, lambda batch, hidden: None)
    return (time.perf_counter() - begun) * 1000 / len(group)


async def _import_ms_per_record(client: Client, group: list[str]) -> float:
    """`nexo memory import`'s pattern: one request of IMPORT_BATCH records after the other."""
    begun = time.perf_counter()
    for first in range(0, len(group), IMPORT_BATCH):
        records = [ImportRecord(agent=AGENT, content=text) for text in group[first : first + IMPORT_BATCH]]
        result = await client.session.send_request(
            ImportRequest(params=ImportParams(records=records)), ImportResult
        )
        if result.rejected:
            raise RuntimeError(f"{len(result.rejected)} records rejected: {result.rejected[0].error}")
    return (time.perf_counter() - begun) * 1000 / len(group)


async def measure_pairs(sentences: list[str]) -> tuple[list[float], list[float]]:
    """Milliseconds per record, end to end and at the ceiling, one pair per group of GROUP records.

    The two alternate group by group, so a busy machine slows both alike.
    """
    end_to_end: list[float] = []
    ceiling: list[float] = []
    embedder = LocalEmbedder()
    with tempfile.TemporaryDirectory(prefix="nexo-bench-import-") as state:
        async with memory_server(Path(state)) as (client, _):
            await embedder.start()
            try:
                warm = ImportRequest(
                    params=ImportParams(records=[ImportRecord(agent=AGENT, content="warm up")])
                )
                await client.session.send_request(warm, ImportResult)
                for start in range(0, len(sentences), GROUP):
                    group = sentences[start : start + GROUP]
                    end_to_end.append(await _import_ms_per_record(client, group))
                    ceiling.append(await _ceiling_ms_per_record(embedder, group))
            finally:
                await embedder.aclose()
    return end_to_end, ceiling


async def _measure(n: int) -> list[Result]:
    corpus = cached_corpus(max(n, DEFAULT_RECORDS))
    sentences = corpus.sentences[:n]
    progress(f"memory import: {len(sentences)} records, end to end and at the embedder's ceiling")
    end_to_end, ceiling = await measure_pairs(sentences)
    rate = Result(
        f"memory import via nexo/memory/import, {len(sentences)} real sentences (ms per record)",
        "ms",
        "the embedder's ceiling: ONNX Runtime alone on the same batches",
        samples=end_to_end,
        baseline=ceiling,
    )
    share = Result(
        "memory import rate as a share of the embedder's ceiling, whole run (goal >= 80 %)",
        "%",
        "-",
        samples=[100 * sum(ceiling) / sum(end_to_end)] if end_to_end else [],
    )
    per_second = Result(
        "memory import records per second (median batch)",
        "rec/s",
        "the embedder's ceiling",
        samples=[1000 / s for s in end_to_end],
        baseline=[1000 / s for s in ceiling],
    )
    return [rate, per_second, share]


def measure(quick: bool, size: int | None = None) -> list[Result]:
    n = size or (QUICK_RECORDS if quick else DEFAULT_RECORDS)
    try:
        return anyio.run(_measure, n)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        failed = Result("memory import", "-", "-")
        failed.errors.append(f"the measurement failed: {describe(exc)}")
        return [failed]
