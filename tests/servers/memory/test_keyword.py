"""The keyword side of recall: informative terms only, the rarest first, a bounded candidate set."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from servers.memory.keyword import CANDIDATE_CAP, MAX_TERMS, PROBE, Term, keyword_query, terms_of
from servers.memory.models import NewMemory, Vector
from servers.memory.recall import Recaller
from servers.memory.store import MemoryStore
from tests.servers.memory.conftest import open_store

pytestmark = pytest.mark.anyio

DIM = 8


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    async with open_store(tmp_path / "memory.db", DIM) as opened:
        yield opened


async def remember(store: MemoryStore, *texts: str) -> list[int]:
    """Store ``texts`` in order (vectors do not matter to keyword recall) and return their ids."""
    rng = np.random.default_rng(len(texts))
    stored = await store.add_many(
        [
            (NewMemory("nexo", text, (), "fact", "owner", 0.5), rng.normal(size=DIM).astype(np.float32))
            for text in texts
        ]
    )
    return [item.memory.id for item in stored]


async def keyword(
    store: MemoryStore, query: str, *, limit: int = 50, probe: int = PROBE, cap: int = CANDIDATE_CAP
) -> list[int]:
    async def unused(text: str) -> Vector:
        raise AssertionError(f"keyword recall embedded {text!r}")

    recalled = await Recaller(store, unused, keyword_probe=probe, keyword_cap=cap).recall(
        "nexo", query, mode="keyword", limit=limit, touch=False
    )
    return [memory.id for memory in recalled.memories]


def words(*terms: Term) -> list[str]:
    return [term.fts for term in terms]


def test_terms_leave_out_stopwords_and_keep_names_written_with_punctuation_as_phrases() -> None:
    assert words(*terms_of("What is the name of MY dentist?")) == ['"name"', '"dentist"']
    assert words(*terms_of("who owns the YTR-2330?")) == ['"owns"', '"ytr 2330"', '"ytr"', '"2330"']
    assert words(*terms_of("Ana's café")) == ['"ana"', '"cafe"']
    assert words(*terms_of("Who is it?")) == ['"who"', '"is"', '"it"']
    assert words(*terms_of('NEAR(ana tea) "unbalanced * col:x')) == [
        '"near ana"',
        '"near"',
        '"ana"',
        '"tea"',
        '"unbalanced"',
        '"col x"',
        '"col"',
        '"x"',
    ]
    assert terms_of("?! ... ()") == []
    assert len(terms_of(" ".join(f"w{i}" for i in range(40)))) == 32


async def test_a_question_of_stopwords_only_ranks_a_bounded_window_of_the_newest_matches(
    store: MemoryStore,
) -> None:
    ids = await remember(store, *(f"this is what it was on day {day}" for day in range(40)))
    assert sorted(await keyword(store, "what is it?", probe=5, cap=10)) == ids[-10:]


async def test_a_question_of_common_words_finds_the_old_memory_holding_all_of_them_first(
    store: MemoryStore,
) -> None:
    oldest, *_ = await remember(
        store,
        "the blue kettle whistles",
        *(f"blue note {n}" for n in range(10)),
        *(f"kettle note {n}" for n in range(10)),
    )
    found = await keyword(store, "blue kettle", probe=5, cap=10)
    assert found[0] == oldest
    assert len(found) == 11


async def test_only_the_rarest_terms_are_searched(store: MemoryStore) -> None:
    rare = [f"codeword{index}" for index in range(MAX_TERMS + 1)]
    rare_ids = await remember(store, *(f"the vault note holds {word}" for word in rare))
    await remember(store, "codeword0 again", *(f"a plain vault number {n}" for n in range(5)))
    found = await keyword(store, " ".join(["vault", *rare]), probe=5)
    # "vault" (held by 14 memories) is common, and of the nine rare words the one held twice is left out.
    assert sorted(found) == rare_ids[1:]


async def test_a_common_term_ranks_the_holders_of_a_rare_one_and_adds_no_candidate(
    store: MemoryStore,
) -> None:
    garden, python_snake = await remember(store, "a snake in the garden", "the python is a snake")
    python = await remember(store, *(f"python script number {n}" for n in range(25)))
    assert await keyword(store, "python snake", probe=20) == [python_snake, garden]
    assert len(await keyword(store, "python snake", probe=30)) == 2 + len(python)


async def test_an_exact_name_written_with_punctuation_ranks_first(store: MemoryStore) -> None:
    parcel, scattered, *_ = await remember(
        store,
        "The parcel SN-4411-B arrived on Monday",
        "SN forms: 4411 copies of B, then B SN 4411 SN B",
        *(f"a note about the weather on day {day}" for day in range(10)),
    )
    assert await keyword(store, "where is SN-4411-B?") == [parcel, scattered]


async def test_a_question_no_memory_holds_a_word_of_searches_its_words_as_prefixes(
    store: MemoryStore,
) -> None:
    serial, _ = await remember(
        store, "the boiler's serial number is 9421804VK1192A0001QX", "the site runs Hugo"
    )
    assert await keyword(store, "9421804VK") == [serial]
    # A prefix only when nothing matches as a whole word: "sit" is no prefix search here.
    assert await keyword(store, "sit runs") == [serial + 1]


async def test_words_are_counted_exactly_phrases_up_to_the_probe_and_the_total_comes_from_fts5s_record(
    store: MemoryStore,
) -> None:
    assert await store.indexed() == 0
    await remember(store, "Café au lait", "a café crème", "tea", *(f"tea number {n}" for n in range(30)))
    assert await store.held_by(['"cafe"', '"tea"', '"unknown"'], 10) == [2, 10, 0]
    assert await store.indexed() == 33
    query = await keyword_query("CAFÉ tea unknown tea-number", store.term_documents, probe=10)
    assert query is not None
    assert [(w.term.fts, w.documents) for w in query.terms] == [('"unknown"', 0), ('"cafe"', 2)]
    assert [(w.term.fts, w.documents) for w in query.ranking] == [
        ('"tea"', 31),
        ('"tea number"', 11),
        ('"number"', 30),
    ]
    assert query.window is None


async def test_a_prefix_match_settles_no_exact_lookup_in_hybrid_recall(store: MemoryStore) -> None:
    axes = np.eye(DIM, dtype=np.float32)
    query: Vector = axes[0]
    near, far = axes[0] + axes[2] * 0.5, axes[1] + axes[2] * 0.5
    stored = await store.add_many(
        [
            (NewMemory("nexo", "Rex gets his flea tablet every month", (), "fact", "owner", 0.5), near),
            (NewMemory("nexo", "Pablo carries an antihistamine", (), "fact", "owner", 0.5), far),
        ]
    )

    async def embed(text: str) -> Vector:
        return query

    recalled = await Recaller(store, embed).recall("nexo", "anti-parasite dose", mode="hybrid", limit=2)
    # "anti *" matches the antihistamine alone, which would make it an exact lookup if it were a word.
    assert [memory.id for memory in recalled.memories] == [item.memory.id for item in stored]
