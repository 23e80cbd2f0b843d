"""How many memories hold each word: a side table the store keeps in step with the full-text index.

FTS5 keeps no document frequencies: its ``bm25()`` counts each term's whole doclist once per
query (tens of milliseconds for a common word at a million memories), and its ``fts5vocab`` table
reads the same doclists. Keyword recall ranks with BM25 of its own (``servers.memory.keyword_rank``)
and reads each word's count here, one primary-key lookup per word.

``memory_terms`` holds, per word, the number of memories whose content or tags hold it. Every
write of a memory's content or tags updates it in the same transaction as the row (and so as the
FTS5 entry the triggers write): an add counts the new memory's words, a forget uncounts them, a
refresh that adds tags counts the tag words the memory did not hold yet. A crash or a rolled-back
transaction so leaves the counts as right as the rows. Archiving changes neither the text nor the
index, so it changes no count. A store of an older schema gets the table from its memories when it
is first opened (``memory_0002_term_documents``: about 30 s per million memories).

Words are split as FTS5's ``unicode61 remove_diacritics 2`` tokenizer splits them: runs of letters
and digits, casefolded, diacritics removed; a memory's tags are split from the JSON text the index
holds (``["garden","work"]``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from shared.db import Migration, Reads, Transaction

_WORD = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
"""The same words in lowercased ASCII text, found a third faster (an import splits every record's
text to count its words)."""
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_UPSERT = (
    "INSERT INTO memory_terms (term, documents) VALUES (?, ?) "
    "ON CONFLICT (term) DO UPDATE SET documents = documents + excluded.documents"
)

Text = tuple[str, str]
"""A memory's indexed text: its content and its tags as the JSON text stored in the row."""


def fold(word: str) -> str:
    """``word`` as the FTS5 tokenizer indexes it: casefolded, diacritics removed.

    Only the characters past ASCII are looked at one by one (every combining mark is one): a
    sentence of the benchmarks' corpus holding some took 8.6 µs character by character, 2.6 µs so."""
    decomposed = unicodedata.normalize("NFD", word.casefold())
    if decomposed.isascii():
        return decomposed
    return unicodedata.normalize("NFC", _NON_ASCII.sub(_unless_combining, decomposed))


def _unless_combining(match: re.Match[str]) -> str:
    return "" if unicodedata.combining(match.group()) else match.group()


def tokens(text: str) -> list[str]:
    """The words of ``text`` in order, folded as the index holds them."""
    return _ASCII_WORD.findall(text.lower()) if text.isascii() else _WORD.findall(fold(text))


def indexed_text(content: str, tags: str) -> str:
    """A memory's text as its full-text entry holds it: its content, then its tags' JSON text (when
    it has some) after a space."""
    return content if tags == "[]" else f"{content} {tags}"


def document_tokens(content: str, tags: str) -> list[str]:
    """The words a memory's full-text entry holds: its content's, then its tags'."""
    return tokens(indexed_text(content, tags))


def _create_term_documents(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE memory_terms (term TEXT PRIMARY KEY, documents INTEGER NOT NULL) WITHOUT ROWID"
    )
    counts: Counter[str] = Counter()
    for content, tags in conn.execute("SELECT content, tags FROM memories"):
        counts.update(set(document_tokens(content, tags)))
    conn.executemany("INSERT INTO memory_terms (term, documents) VALUES (?, ?)", sorted(counts.items()))


TERM_MIGRATIONS: tuple[Migration, ...] = (Migration("memory_0002_term_documents", _create_term_documents),)


async def count_documents(
    tx: Transaction, *, added: Iterable[Text] = (), removed: Iterable[Text] = ()
) -> None:
    """Count the words of the memories ``added`` and uncount those of the memories ``removed``.

    A memory whose text changed is one of each: only the words it gained or lost change count.
    """
    delta: Counter[str] = Counter()
    for content, tags in added:
        delta.update(set(document_tokens(content, tags)))
    for content, tags in removed:
        delta.subtract(set(document_tokens(content, tags)))
    changed = sorted((term, n) for term, n in delta.items() if n)
    if not changed:
        return
    await tx.executemany(_UPSERT, changed)
    lost = [term for term, n in changed if n < 0]
    if lost:
        await tx.execute(
            "DELETE FROM memory_terms WHERE documents <= 0 AND term IN (SELECT value FROM json_each(?))",
            (json.dumps(lost),),
        )


async def documents(db: Reads, words: Sequence[str]) -> dict[str, int]:
    """How many memories (of every agent) hold each of ``words``; a word none holds is left out."""
    if not words:
        return {}
    rows = await db.fetchall(
        "SELECT term, documents FROM memory_terms WHERE term IN (SELECT value FROM json_each(?))",
        (json.dumps(list(words)),),
    )
    return {str(term): int(n) for term, n in rows}
