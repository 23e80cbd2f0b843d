from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import pytest

from servers.memory import vector_cache, vector_search
from servers.memory.vector_codes import (
    CodeBlock,
    Snapshot,
    VectorDimensionError,
    asymmetric_scores,
    hamming_distances,
    sign_codes,
    smallest,
)
from servers.memory.vectors import VECTOR_MIGRATIONS, VectorIndex
from shared.db import Database

pytestmark = pytest.mark.anyio

DIM = 64
SEED = 7


def clustered(n: int, *, seed: int = SEED, dim: int = DIM, clusters: int = 40) -> np.ndarray:
    """Unit vectors in gaussian clusters around a shared direction, like sentence embeddings."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(dim)
    centres = rng.standard_normal((clusters, dim)) + 0.8 * shared
    points = centres[rng.integers(0, clusters, n)] + 0.9 * rng.standard_normal((n, dim))
    return np.asarray(points / np.linalg.norm(points, axis=1, keepdims=True), dtype=np.float32)


def near(vector: np.ndarray, seed: int, spread: float = 0.3) -> np.ndarray:
    """A query close to `vector`."""
    noisy = vector + spread * np.random.default_rng(seed).standard_normal(vector.size) / np.sqrt(vector.size)
    return np.asarray(noisy / np.linalg.norm(noisy), dtype=np.float32)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite3"


@pytest.fixture(params=[False, True], ids=["numpy", "sqlite-vec"])
async def db(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Database]:
    async with Database.open(db_path, VECTOR_MIGRATIONS, load_vec=request.param) as database:
        yield database


@pytest.fixture
async def plain_db(db_path: Path) -> AsyncIterator[Database]:
    async with Database.open(db_path, VECTOR_MIGRATIONS) as database:
        yield database


async def filled(db: Database, rows: dict[str, np.ndarray], *, first_id: int = 1) -> VectorIndex:
    """An index holding `rows[agent]` with consecutive ids, agent after agent."""
    index = VectorIndex(db, DIM)
    await index.load()
    next_id = first_id
    async with db.transaction() as tx:
        for agent, matrix in rows.items():
            await index.add_many(tx, [(next_id + i, agent, vector) for i, vector in enumerate(matrix)])
            next_id += len(matrix)
    return index


def ids_of(hits: list[tuple[int, float]]) -> list[int]:
    return [memory_id for memory_id, _ in hits]


# --- search quality -------------------------------------------------------------------------------


async def test_search_finds_at_least_95_percent_of_the_exact_top_10(db: Database) -> None:
    data = clustered(3000)
    index = await filled(db, {"ana": data})
    found = 0
    for q in range(60):
        query = near(data[q * 37], seed=q)
        approximate = await index.search("ana", query, 10)
        exact = await index.search("ana", query, 10, exact=True)
        assert len(approximate) == 10
        found += len(set(ids_of(approximate)) & set(ids_of(exact)))
    assert found / 600 >= 0.95


async def test_search_returns_the_nearest_first_with_cosine_distances(db: Database) -> None:
    data = clustered(2000)
    index = await filled(db, {"ana": data})
    query = data[41]
    hits = await index.search("ana", query, 5)
    expected = 1.0 - data @ query
    assert hits[0][0] == 42
    assert hits[0][1] == pytest.approx(0.0, abs=1e-5)
    assert [d for _, d in hits] == sorted(d for _, d in hits)
    assert [d for _, d in hits] == pytest.approx([float(expected[i - 1]) for i in ids_of(hits)], abs=1e-5)


async def test_exact_search_is_the_same_with_and_without_sqlite_vec(db_path: Path) -> None:
    data = clustered(500)
    results = []
    for load_vec in (False, True):
        async with Database.open(db_path, VECTOR_MIGRATIONS, load_vec=load_vec) as db:
            index = VectorIndex(db, DIM)
            await index.load()
            if load_vec is False:
                async with db.transaction() as tx:
                    await index.add_many(tx, [(i + 1, "ana", v) for i, v in enumerate(data)])
            results.append(await index.search("ana", near(data[3], seed=1), 20, exact=True))
    assert ids_of(results[0]) == ids_of(results[1])
    assert [d for _, d in results[0]] == pytest.approx([d for _, d in results[1]], abs=1e-5)


async def test_a_small_agent_is_searched_exactly(db: Database) -> None:
    data = clustered(50)
    index = await filled(db, {"ana": data})
    query = near(data[0], seed=3)
    assert await index.search("ana", query, 50) == await index.search("ana", query, 50, exact=True)


# --- scoping and exclusion ------------------------------------------------------------------------


async def test_search_never_returns_another_agents_memories(db: Database) -> None:
    data = clustered(2400)
    index = await filled(db, {"ana": data[:1200], "bo": data[1200:]})
    for q in range(10):
        query = near(data[q], seed=q)  # close to ana's memories
        assert all(memory_id > 1200 for memory_id in ids_of(await index.search("bo", query, 10)))
        assert all(memory_id > 1200 for memory_id in ids_of(await index.search("bo", query, 10, exact=True)))
        assert all(memory_id <= 1200 for memory_id in ids_of(await index.search("ana", query, 10)))
    assert await index.search("carol", data[0], 10) == []
    assert (await index.count(), await index.count("ana"), await index.count("bo")) == (2400, 1200, 1200)


async def test_excluded_ids_are_never_returned(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})
    query = data[99]
    best = ids_of(await index.search("ana", query, 5))
    for exact in (False, True):
        hits = await index.search("ana", query, 5, exact=exact, exclude=set(best))
        assert len(hits) == 5
        assert not set(ids_of(hits)) & set(best)


async def test_a_vector_moved_to_another_agent_is_found_only_there(db: Database) -> None:
    data = clustered(1200)
    index = await filled(db, {"ana": data})
    async with db.transaction() as tx:
        await index.add(tx, 10, "bo", data[9])
    assert 10 not in ids_of(await index.search("ana", data[9], 10))
    assert ids_of(await index.search("bo", data[9], 10)) == [10]
    assert (await index.count("ana"), await index.count("bo")) == (1199, 1)


# --- writes, transactions and the cache -------------------------------------------------------------


async def test_removed_vector_is_no_longer_found(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})
    async with db.transaction() as tx:
        await index.remove(tx, 100)
        await index.remove(tx, 99_999)  # no vector: nothing happens
    assert 100 not in ids_of(await index.search("ana", data[99], 10))
    assert 100 not in ids_of(await index.search("ana", data[99], 10, exact=True))
    assert await index.count() == 1499


async def test_adding_again_replaces_the_vector(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})
    async with db.transaction() as tx:
        await index.add(tx, 1, "ana", data[700])
    assert ids_of(await index.search("ana", data[700], 2)) == [1, 701]
    assert await index.count() == 1500


async def test_rolled_back_add_leaves_no_vector_behind(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data[:1400]})
    seen_inside: list[list[int]] = []

    async def add_then_abort() -> None:
        async with db.transaction() as tx:
            await index.add_many(tx, [(5000 + i, "ana", v) for i, v in enumerate(data[1400:])])
            seen_inside.append(ids_of(await index.search("ana", data[1450], 1)))
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError, match="abort"):
        await add_then_abort()
    assert seen_inside == [[5050]]  # inside its transaction the writer sees its own vectors
    for q in range(1400, 1500, 10):
        hits = await index.search("ana", data[q], 10)
        assert len(hits) == 10
        assert all(memory_id < 5000 for memory_id in ids_of(hits))
    assert await index.count() == 1400


async def test_rolled_back_remove_keeps_the_vector_searchable(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})

    async def remove_then_abort() -> None:
        async with db.transaction() as tx:
            await index.remove(tx, 300)
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError, match="abort"):
        await remove_then_abort()
    assert ids_of(await index.search("ana", data[299], 1)) == [300]


async def test_rows_deleted_behind_the_index_are_never_returned(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})
    query = data[0]
    nearest = ids_of(await index.search("ana", query, 40, exact=True))
    # Deleted without the index knowing: first the 10 best, then one further away.
    await db.execute(
        "DELETE FROM memory_vectors WHERE memory_id IN (SELECT value FROM json_each(?))", (str(nearest[:10]),)
    )
    assert ids_of(await index.search("ana", query, 10)) == nearest[10:20]
    await db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (nearest[25],))
    assert ids_of(await index.search("ana", query, 10)) == nearest[10:20]
    assert ids_of(await index.search("ana", query, 20)) == [*nearest[10:25], *nearest[26:31]]
    # Nearly all gone: the few left come from SQLite even though the cache still lists the others.
    await db.execute(
        "DELETE FROM memory_vectors WHERE memory_id NOT IN (SELECT value FROM json_each(?))",
        (str(nearest[30:35]),),
    )
    assert ids_of(await index.search("ana", query, 10)) == nearest[30:35]


async def test_clear_deletes_every_vector_and_a_rolled_back_clear_deletes_none(db: Database) -> None:
    data = clustered(1200)
    index = await filled(db, {"ana": data[:600], "bo": data[600:]})

    async def clear_then_abort() -> None:
        async with db.transaction() as tx:
            await index.clear(tx)
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError, match="abort"):
        await clear_then_abort()
    assert ids_of(await index.search("ana", data[0], 1)) == [1]
    async with db.transaction() as tx:
        await index.clear(tx)
    assert await index.search("ana", data[0], 1) == []
    assert await index.count() == 0


async def test_reset_takes_vectors_of_the_new_size(db: Database) -> None:
    index = await filled(db, {"ana": clustered(100)})
    wide = clustered(600, dim=100)
    async with db.transaction() as tx:
        await index.reset(tx, 100)
        await index.add_many(tx, [(i + 1, "ana", v) for i, v in enumerate(wide)])
    assert index.dim == 100
    assert ids_of(await index.search("ana", wide[7], 1)) == [8]
    with pytest.raises(VectorDimensionError):
        await index.search("ana", clustered(1)[0], 1)


async def test_a_rolled_back_reset_keeps_the_old_vectors_and_reports_their_size(plain_db: Database) -> None:
    index = await filled(plain_db, {"ana": clustered(10)})

    async def reset_then_abort() -> None:
        async with plain_db.transaction() as tx:
            await index.reset(tx, 100)
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError, match="abort"):
        await reset_then_abort()
    for _ in range(2):
        with pytest.raises(
            VectorDimensionError, match="vectors have 64 dimensions but the embedder gives 100"
        ):
            await index.search("ana", np.ones(100, np.float32), 1)
    assert await index.count() == 10


async def test_vectors_written_before_load_are_found_by_concurrent_first_searches(db: Database) -> None:
    data = clustered(900)
    index = VectorIndex(db, DIM)
    async with db.transaction() as tx:
        await index.add_many(tx, [(i + 1, "ana", v) for i, v in enumerate(data)])
    found: list[list[int]] = []

    async def search(q: int) -> None:
        found.append(ids_of(await index.search("ana", data[q], 1)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(search, 500)
        tg.start_soon(search, 600)
    assert sorted(found) == [[501], [601]]
    assert repr(index) == f"<VectorIndex {db.path} dim=64 agents=1>"


async def test_many_writes_between_searches_rebuild_the_cache(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_cache, "RESYNC_LIMIT", 100)
    data = clustered(1500)
    index = await filled(db, {"ana": data[:1000]})
    async with db.transaction() as tx:
        await index.add_many(tx, [(2000 + i, "ana", v) for i, v in enumerate(data[1000:])])
    assert ids_of(await index.search("ana", data[1200], 1)) == [2200]


async def test_large_agents_are_searched_on_a_worker_thread_with_the_same_answers(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = clustered(2000)
    index = await filled(db, {"ana": data})
    query = near(data[5], seed=5)
    inline = await index.search("ana", query, 10)
    monkeypatch.setattr(vector_search, "THREAD_ABOVE", 1000)
    assert await index.search("ana", query, 10) == inline


# --- durability -------------------------------------------------------------------------------------


async def test_reloading_from_disk_gives_the_same_answers(db_path: Path) -> None:
    data = clustered(3000)
    queries = [near(data[q * 101], seed=q) for q in range(20)]
    async with Database.open(db_path, VECTOR_MIGRATIONS) as db:
        index = await filled(db, {"ana": data[:2000], "bo": data[2000:]})
        async with db.transaction() as tx:
            await index.remove(tx, 17)
        before = [await index.search(agent, q, 10) for q in queries for agent in ("ana", "bo")]
    async with Database.open(db_path, VECTOR_MIGRATIONS) as db:
        reopened = VectorIndex(db, DIM)
        await reopened.load()
        after = [await reopened.search(agent, q, 10) for q in queries for agent in ("ana", "bo")]
    assert after == before


# --- errors -----------------------------------------------------------------------------------------


async def test_a_database_of_another_dimension_is_refused_naming_the_fix(db_path: Path) -> None:
    async with Database.open(db_path, VECTOR_MIGRATIONS) as db:
        await filled(db, {"ana": clustered(3)})
    async with Database.open(db_path, VECTOR_MIGRATIONS) as db:
        index = VectorIndex(db, 384)
        with pytest.raises(VectorDimensionError) as caught:
            await index.load()
    assert str(caught.value) == (
        f"{db_path}: the stored memory vectors have 64 dimensions but the embedder gives 384. Fix: run "
        "`nexo memory reindex` to embed every memory again with the current model, or configure the model "
        "that wrote them"
    )


async def test_a_vector_of_the_wrong_size_is_refused_naming_the_memory(plain_db: Database) -> None:
    index = VectorIndex(plain_db, DIM)
    with pytest.raises(VectorDimensionError) as caught:
        async with plain_db.transaction() as tx:
            await index.add_many(tx, [(1, "ana", clustered(1)[0]), (2, "ana", np.ones(384, np.float32))])
    assert str(caught.value) == (
        "the vector of memory 2 has shape (384,), expected (64,): the embedding model changed since the "
        "index was built. Fix: embed with the model the index was built for, or rebuild the vectors with "
        "`nexo memory reindex`"
    )
    with pytest.raises(VectorDimensionError, match=r"^the query vector has shape \(2, 64\), expected"):
        await index.search("ana", clustered(2), 1)
    assert await index.count() == 0


async def test_invalid_arguments_are_refused_with_the_bad_value(plain_db: Database) -> None:
    index = VectorIndex(plain_db, DIM)
    vector = clustered(1)[0]
    with pytest.raises(ValueError, match=r"^dim=0 must be a positive whole number"):
        VectorIndex(plain_db, 0)
    with pytest.raises(ValueError, match=r"^k=0 must be a whole number >= 1$"):
        await index.search("ana", vector, 0)
    with pytest.raises(ValueError, match=r"^agent '' must be a non-empty string$"):
        await index.search("", vector, 1)
    with pytest.raises(ValueError, match=r"^the query vector is zero or not finite"):
        await index.search("ana", np.zeros(DIM, np.float32), 1)
    async with plain_db.transaction() as tx:
        with pytest.raises(TypeError, match=r"^memory_id '1' is str, expected int$"):
            await index.add(tx, "1", "ana", vector)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^memory id 3 appears more than once in add_many\(\)$"):
            await index.add_many(tx, [(3, "ana", vector), (3, "ana", vector)])
        await index.add_many(tx, [])
    async with plain_db.transaction() as tx:
        with pytest.raises(ValueError, match=r"^dim=-1 must be"):
            await index.reset(tx, -1)
    assert await index.count() == 0


# --- the numpy kernels ------------------------------------------------------------------------------


def test_hamming_distances_count_differing_signs_including_past_255() -> None:
    dim = 384
    rng = np.random.default_rng(1)
    unit = rng.standard_normal((5, dim)).astype(np.float32)
    unit[1] = -unit[0]  # every sign differs: distance 384 does not fit in a byte
    codes = sign_codes(unit)
    expected = [int(np.count_nonzero((unit[i] > 0) != (unit[0] > 0))) for i in range(5)]
    assert hamming_distances(np.ascontiguousarray(codes.T), codes[0]).tolist() == expected
    assert expected[:2] == [0, 384]


@pytest.mark.parametrize("words", [1, 2, 3, 4, 6, 7, 12])
def test_hamming_distances_match_a_bit_count_for_any_width_and_across_chunks(words: int) -> None:
    # Popcounts are summed in 8 bits three words at a time: widths on either side of a group,
    # every bit differing (64 per word), and more codes than one chunk of the scan.
    rng = np.random.default_rng(words)
    n = 65_536 + 17
    columns = rng.integers(0, 2**63, size=(words, n), dtype=np.uint64)
    columns[:, 1] |= np.uint64(2**63)
    query = rng.integers(0, 2**63, size=words, dtype=np.uint64)
    columns[:, 0] = query
    columns[:, 1] = ~query
    expected = sum(np.bitwise_count(columns[w] ^ query[w]).astype(np.int64) for w in range(words))
    distances = hamming_distances(columns, query)
    assert distances.dtype == np.uint16
    assert distances.tolist() == expected.tolist()
    assert distances[:2].tolist() == [0, 64 * words]


def test_smallest_takes_the_m_lowest_breaking_ties_by_position() -> None:
    distances = np.array([5, 1, 3, 1, 3, 0, 3], dtype=np.uint16)
    assert sorted(smallest(distances, 4).tolist()) == [1, 2, 3, 5]
    assert smallest(distances, 10).tolist() == list(range(7))


def _smallest_by_sorting(distances: np.ndarray, m: int) -> list[int]:
    return sorted(np.lexsort((np.arange(distances.size), distances))[:m].tolist())


@pytest.mark.parametrize(
    "shape",
    [
        "uniform",  # the sampled cut-off holds
        "sampled rows nearest",  # every 64th row nearest: the sample misjudges the rest
        "all tied",  # ties at the cut-off broken by position
    ],
)
def test_smallest_of_many_matches_a_full_sort(shape: str) -> None:
    rng = np.random.default_rng(3)
    n = 300_000
    if shape == "uniform":
        distances = rng.integers(100, 280, size=n).astype(np.uint16)
    elif shape == "sampled rows nearest":
        distances = np.full(n, 200, dtype=np.uint16)
        distances[::64] = 3
    else:
        distances = np.full(n, 150, dtype=np.uint16)
    for m in (1, 900, 6_400, 20_000):
        assert smallest(distances, m).tolist() == _smallest_by_sorting(distances, m)


def test_asymmetric_scores_are_the_query_dotted_with_the_signs() -> None:
    rng = np.random.default_rng(2)
    unit = rng.standard_normal((4, 70)).astype(np.float32)
    query = rng.standard_normal(70).astype(np.float32)
    signs = np.where(unit > 0, 1.0, -1.0)
    columns = np.ascontiguousarray(sign_codes(unit).T)
    assert asymmetric_scores(columns, query) == pytest.approx(signs @ query, abs=1e-4)
    # Codes gathered from a larger block, as a search gathers its shortlist.
    assert asymmetric_scores(np.take(columns, [3, 1], axis=1), query) == pytest.approx(
        (signs @ query)[[3, 1]], abs=1e-4
    )


def test_code_block_keeps_ids_sorted_and_old_snapshots_unchanged() -> None:
    codes = sign_codes(clustered(6))
    block = CodeBlock(1)
    block.upsert(np.array([5, 1, 9]), codes[:3])
    before = block.snapshot()
    block.upsert(np.array([3, 12]), codes[3:5])
    block.discard(np.array([1, 42]))
    block.upsert(np.array([9]), codes[5:6])  # a replacement
    after = block.snapshot()
    assert before.ids.tolist() == [1, 5, 9]
    assert before.columns[0].tolist() == codes[[1, 0, 2], 0].tolist()
    assert after.ids.tolist() == [3, 5, 9, 12]
    assert after.columns[0].tolist() == codes[[3, 0, 5, 4], 0].tolist()
    assert len(block) == 4


async def test_concurrent_searches_agree(db: Database) -> None:
    data = clustered(1500)
    index = await filled(db, {"ana": data})
    results: dict[int, list[tuple[int, float]]] = {}

    async def search(q: int) -> None:
        results[q] = await index.search("ana", data[q], 3)

    async with anyio.create_task_group() as tg:
        for q in range(8):
            tg.start_soon(search, q)
    assert {q: ids_of(hits)[0] for q, hits in results.items()} == {q: q + 1 for q in range(8)}


def test_an_agent_of_up_to_a_hundred_thousand_vectors_reranks_fewer_rows_and_rescores_fewer_codes() -> None:
    """Measured by bench.rerank_sweep: 20 rows per result and 8 codes per row keep 99.6 % of the
    exact top ten at 100,000 vectors; a million needs 30 rows per result and 16 codes per row for 99 %."""
    assert [vector_search.rerank_rows(n, 20) for n in (500, 100_000, 100_001, 1_000_000)] == [
        400,
        400,
        600,
        600,
    ]
    assert [vector_search.rescored_codes(n, 600) for n in (100_000, 100_001)] == [4_800, 9_600]
    assert vector_search.rerank_rows(100_000, 1) == vector_search.RERANK_MIN


async def test_a_large_agents_scan_is_split_between_threads_with_the_same_answers(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = clustered(2000)
    index = await filled(db, {"ana": data})
    query = near(data[7], seed=7)
    whole = await index.search("ana", query, 10)
    scanned: list[tuple[int, int]] = []
    scan = Snapshot.scan

    def recorded(snapshot: Snapshot, query: np.ndarray, start: int, stop: int, out: np.ndarray) -> None:
        scanned.append((start, stop))
        scan(snapshot, query, start, stop, out)

    monkeypatch.setattr(Snapshot, "scan", recorded)
    monkeypatch.setattr(vector_search, "THREAD_ABOVE", 1000)
    monkeypatch.setattr(vector_search, "SCAN_THREADS", 3)
    assert await index.search("ana", query, 10) == whole
    assert sorted(scanned) == [(0, 666), (666, 1333), (1333, 2000)]
