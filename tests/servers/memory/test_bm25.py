"""BM25 of many texts at once scores each text to the bit as its definition does, one text at a time."""

from __future__ import annotations

import random

import pytest

from servers.memory.bm25 import score_batch
from servers.memory.keyword import Term
from servers.memory.keyword_rank import K1
from servers.memory.terms import document_tokens, indexed_text, tokens
from tests.servers.memory import bm25_reference


def test_words_phrases_and_prefixes_count_as_the_definition_says() -> None:
    text = "the blue kayak and the blue-kayak paddle: kayaking with Ana, blue kayak again"
    words = tokens(text)
    terms = [
        (Term(("kayak",)), 2.5),
        (Term(("blue", "kayak")), 1.5),
        (Term(("kayak",), prefix=True), 1.0),
        (Term(("ladder",)), 3.0),
        (Term(("ana",)), 0.5),
    ]
    average = 9.0
    norm = K1 * (0.25 + 0.75 * len(words) / average)
    held = {"kayak": 3, "blue kayak": 3, "kayak *": 4, "ladder": 0, "ana": 1}
    expected = sum(
        weight * tf * (K1 + 1) / (tf + norm)
        for (_, weight), tf in zip(terms, held.values(), strict=True)
        if tf
    )
    scored = score_batch([text], terms, average)
    assert scored.scores.tolist() == [pytest.approx(expected, rel=1e-12)]
    assert scored.whole.tolist() == [False]  # no "ladder"
    assert score_batch([text], [terms[0], terms[4]], average).whole.tolist() == [True]


def test_a_long_word_is_told_from_others_sharing_its_first_eight_bytes() -> None:
    texts = [
        "clearmaxdoublings set",
        "clearmaxattempts set",
        "clearmax set",
        "clearmaxdoublingsx set",
        "xclearmaxdoublings set",
        "clearmaxdoubling set",
    ]
    weights = [(Term(("clearmaxdoublings",)), 1.0)]
    assert score_batch(texts, weights, 2.0).whole.tolist() == [True, False, False, False, False, False]
    prefix = [(Term(("clearmaxdoub",), prefix=True), 1.0)]
    assert score_batch(texts, prefix, 2.0).whole.tolist() == [True, False, False, True, False, True]
    eight = [(Term(("clearmax",)), 1.0)]
    assert score_batch(texts, eight, 2.0).whole.tolist() == [False, False, True, False, False, False]


def test_a_phrase_never_spans_two_texts() -> None:
    weights = [(Term(("end", "start")), 1.0)]
    assert score_batch(["the end", "start here", "the end start"], weights, 2.0).whole.tolist() == [
        False,
        False,
        True,
    ]


_WORDS = [
    "kayak", "kayaks", "kayaking", "blue", "garden", "ana", "café", "cafe", "école", "naïve", "straße",
    "strasse", "ΣΟΦΙΑ", "σοφία", "東京", "x", "x1", "42", "v2", "sn", "4411", "clearmaxdoublings",
    "clearmaxattempts", "clearmax", "clearmaxdoubling", "antidisestablishmentarianism", "e", "mail",
]  # fmt: skip
_GLUE = [" ", " ", " ", ", ", "-", "_", ". ", "\u2014", "’", "\x00", "\t", "  ", "/", "é", "\u0301"]


def _text(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 12))]
    words = [word.upper() if rng.random() < 0.15 else word for word in words]
    return "".join(word + rng.choice(_GLUE) for word in words)


def _terms(rng: random.Random) -> list[tuple[Term, float]]:
    terms: list[tuple[Term, float]] = []
    for _ in range(rng.randint(1, 9)):
        words = tuple(tokens(" ".join(rng.choice(_WORDS) for _ in range(rng.choice([1, 1, 1, 2, 3])))))
        prefix = rng.random() < 0.2
        if prefix:
            words = (*words[:-1], words[-1][: rng.randint(1, len(words[-1]))])
        terms.append((Term(words, prefix), rng.uniform(0.1, 9.0)))
    return terms


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_scores_each_text_to_the_bit_as_the_definition_does(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        memories = [(_text(rng), rng.choice(["[]", "[]", '["garden","Café"]', '["x1"]'])) for _ in range(40)]
        texts = [indexed_text(content, tags) for content, tags in memories]
        weights = _terms(rng)
        average = rng.uniform(1.0, 12.0)
        scored = score_batch(texts, weights, average)
        expected = [bm25_reference.score(document_tokens(*memory), weights, average) for memory in memories]
        assert scored.scores.tolist() == [score for score, _ in expected]
        assert scored.whole.tolist() == [whole for _, whole in expected]
        # Alone, a text scores the same bits as beside the others.
        alone = score_batch(texts[:1], weights, average)
        assert alone.scores.tolist() == scored.scores.tolist()[:1]


def test_no_texts_score_nothing() -> None:
    scored = score_batch([], [(Term(("kayak",)), 1.0)], 3.0)
    assert scored.scores.size == 0
    assert scored.whole.size == 0
