"""Real English sentences from text that ships on the machine, and query sets built from them.

Sources, in this order: the manual pages under /usr/share/man (gzip-compressed roff; the markup is
stripped here, which is much faster than rendering each page with ``man -l``), the text files under
/usr/share/doc, and the docstrings of the Python modules of the running interpreter's standard
library. Sentences are 40 to 300 characters of at least six words, deduplicated, in a fixed order,
so a given machine always yields the same corpus.

Queries are made at bench time from that corpus and never from the recall tuning data (bench/
recall_data/), so the tuning has never seen them:

* ``summary``: a manual page's one-line NAME summary ("list directory contents"), whose target is
  the first sentence of the page's DESCRIPTION ("List information about the FILEs"): two texts
  about one thing in different words (pairs sharing half their words or more are left out);
* ``keywords``: three of the target's rarest words, shuffled, as a person types them;
* ``rare``: the single rarest word of the target (a name, an option, a jargon term).
"""

from __future__ import annotations

import ast
import gzip
import random
import re
import sysconfig
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
DOC_ROOT = Path("/usr/share/doc")
MIN_CHARS, MAX_CHARS, MIN_WORDS = 40, 300, 6
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_ROFF_ESCAPE = re.compile(
    r"\\f[BIRPCW0-9]|\\f\(..|\\f\[[^]]*\]|\\\(..|\\\[[^]]*\]|\\[&|^%]|\\s[-+]?\d|\\\*\(?.."
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_STOP = frozenset(
    " ".join(
        (
            "the a an and or of to in on for with is are be by as at it this that from not can if when will",
            "which use used using may any all each its see also only one two other more than into such these",
            "those their there has have was were been but you your they them should must does do file files",
        )
    ).split()
)


@dataclass(frozen=True, slots=True)
class Query:
    kind: str
    text: str
    target: int
    """Index of the sentence (in the corpus) a good recall puts first."""


def _roff_text(source: str) -> Iterator[tuple[str, str]]:
    """(section name, text) paragraphs of a manual page's roff source."""
    section = ""
    lines: list[str] = []
    for raw in source.splitlines():
        if raw.startswith((".SH", ".Sh")):
            if lines:
                yield section, " ".join(lines)
            section, lines = raw[3:].strip().strip('"').upper(), []
            continue
        if raw.startswith((".PP", ".P", ".LP", ".TP", ".IP", ".sp", ".br", ".Pp")):
            if lines:
                yield section, " ".join(lines)
            lines = []
            continue
        if raw.startswith((".", "'")):
            macro, _, rest = raw.partition(" ")
            if macro in (".B", ".I", ".BR", ".IR", ".RB", ".RI", ".BI", ".IB", ".Nm", ".Nd", ".Ar", ".Fl"):
                lines.append(rest.replace('"', ""))
            continue
        lines.append(raw)
    if lines:
        yield section, " ".join(lines)


def _clean(text: str) -> str:
    text = _ROFF_ESCAPE.sub("", text).replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
    return " ".join(text.split())


def _sentences(paragraph: str) -> Iterator[str]:
    for sentence in _SENTENCE_END.split(paragraph):
        sentence = sentence.strip()
        if MIN_CHARS <= len(sentence) <= MAX_CHARS and len(_WORD.findall(sentence)) >= MIN_WORDS:
            yield sentence


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


def _man_pages() -> Iterator[Path]:
    # English pages only: the locale directories (de, fr, ...) hold translations.
    for section in sorted(MAN_ROOT.glob("man[1-8]")):
        yield from sorted(section.glob("*.gz"))


@dataclass
class Corpus:
    sentences: list[str]
    summaries: list[tuple[str, int]]
    """(a manual page's NAME summary, index of its DESCRIPTION's first sentence)."""


def build(limit: int) -> Corpus:
    """Up to ``limit`` distinct sentences (fewer when the machine has less text)."""
    seen: dict[str, int] = {}
    ordered: list[str] = []
    summaries: list[tuple[str, int]] = []

    def add(sentence: str) -> int | None:
        if sentence in seen:
            return seen[sentence]
        if len(seen) >= limit:
            return None
        seen[sentence] = len(ordered)
        ordered.append(sentence)
        return seen[sentence]

    for page in _man_pages():
        if len(seen) >= limit:
            break
        try:
            source = gzip.decompress(page.read_bytes()).decode("utf-8", errors="replace")
        except (OSError, EOFError):
            continue
        summary: str | None = None
        first_description: int | None = None
        for section, paragraph in _roff_text(source):
            text = _clean(paragraph)
            if section == "NAME" and summary is None and " - " in text:
                summary = text.split(" - ", 1)[1].strip()
                continue
            for sentence in _sentences(text):
                index = add(sentence)
                if section == "DESCRIPTION" and first_description is None and index is not None:
                    first_description = index
        if summary and first_description is not None and len(summary.split()) >= 3:
            said = _words(summary)
            if len(said & _words(ordered[first_description])) < len(said) / 2:
                summaries.append((summary, first_description))
    for path in sorted(DOC_ROOT.glob("*/*")):
        if len(seen) >= limit:
            break
        if path.suffix in (".gz", ".html", ".png", ".svg") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="strict")
        except (OSError, UnicodeDecodeError):
            continue
        for sentence in _sentences(" ".join(text.split())):
            add(sentence)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for module in sorted(stdlib.rglob("*.py")):
        if len(seen) >= limit:
            break
        try:
            tree = ast.parse(module.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    for sentence in _sentences(" ".join(doc.split())):
                        add(sentence)
    return Corpus(ordered, summaries)


def queries(corpus: Corpus, per_kind: int, seed: int) -> list[Query]:
    """``per_kind`` queries of each kind (fewer summaries when the corpus has fewer)."""
    rng = random.Random(seed)
    frequency: Counter[str] = Counter()
    for sentence in corpus.sentences:
        frequency.update({w.lower() for w in _WORD.findall(sentence)})

    def rarest(sentence: str) -> list[str]:
        words = {w.lower() for w in _WORD.findall(sentence) if len(w) > 3 and w.lower() not in _STOP}
        return sorted(words, key=lambda w: (frequency[w], w))

    made: list[Query] = []
    for summary, target in rng.sample(corpus.summaries, min(per_kind, len(corpus.summaries))):
        made.append(Query("summary", summary, target))
    targets = rng.sample(range(len(corpus.sentences)), min(len(corpus.sentences), 4 * per_kind))
    keyword_count = rare_count = 0
    for number, target in enumerate(targets):
        words = rarest(corpus.sentences[target])
        if rare_count < per_kind and number % 2 and words and frequency[words[0]] == 1:
            made.append(Query("rare", words[0], target))
            rare_count += 1
        elif keyword_count < per_kind and len(words) >= 3:
            chosen = words[:3]
            rng.shuffle(chosen)
            made.append(Query("keywords", " ".join(chosen), target))
            keyword_count += 1
    return made
