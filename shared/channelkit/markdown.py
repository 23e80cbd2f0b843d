"""The Markdown subset models write, parsed once into blocks of inline nodes for every renderer.

Whatever does not parse as one of the constructs below stays literal text, so a renderer never
emits half a construct: its output is balanced by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

InlineStyle = Literal["bold", "italic", "strike"]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Code:
    code: str


@dataclass(frozen=True, slots=True)
class Styled:
    style: InlineStyle
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Link:
    children: tuple[Inline, ...]
    url: str
    source: str
    """The Markdown as written, shown literally where the link may not become one."""


Inline = Text | Code | Styled | Link


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a paragraph, heading, list item or quote; ``marker`` is the list marker."""

    kind: Literal["text", "heading", "bullet", "numbered", "quote"]
    indent: str
    marker: str
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Fenced:
    language: str
    code: str


Block = Line | Fenced

FENCE_OPEN: Final = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_BULLET = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+(?P<text>.*)$")
_NUMBERED = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>\d{1,9}[.)])[ \t]+(?P<text>.*)$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(?P<text>.*)$")
_LINK = re.compile(r"\[(?P<text>[^\[\]\n]+)\]\((?P<url>[^()\s]+)\)")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")


def is_fence_close(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]}
    )


def fence_language(info: str) -> str:
    """The language of a fence's info string, or "" when it is not a plain name."""
    word = info.split(maxsplit=1)[0] if info.strip() else ""
    return word if _LANGUAGE.fullmatch(word) else ""


def parse_blocks(md: str) -> list[Block]:
    blocks: list[Block] = []
    lines = md.replace("\r\n", "\n").split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if opening := FENCE_OPEN.match(line):
            fence = opening["fence"]
            body: list[str] = []
            while index < len(lines) and not is_fence_close(lines[index], fence):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or past the end of an unclosed block)
            blocks.append(Fenced(fence_language(opening["info"]), "\n".join(body)))
            continue
        blocks.append(_line(line))
    return blocks


def _line(line: str) -> Line:
    if heading := _HEADING.match(line):
        return Line("heading", "", "", parse_inline(heading["text"]))
    if bullet := _BULLET.match(line):
        return Line("bullet", bullet["indent"], "-", parse_inline(bullet["text"]))
    if numbered := _NUMBERED.match(line):
        return Line("numbered", numbered["indent"], numbered["marker"], parse_inline(numbered["text"]))
    if quote := _QUOTE.match(line):
        return Line("quote", "", "", parse_inline(quote["text"]))
    return Line("text", "", "", parse_inline(line))


_DELIMITERS: Final[tuple[tuple[str, InlineStyle], ...]] = (
    ("**", "bold"),
    ("__", "bold"),
    ("~~", "strike"),
    ("*", "italic"),
    ("_", "italic"),
)


def parse_inline(text: str) -> tuple[Inline, ...]:
    nodes: list[Inline] = []
    literal: list[str] = []

    def emit(node: Inline) -> None:
        if literal:
            nodes.append(Text("".join(literal)))
            literal.clear()
        nodes.append(node)

    position = 0
    while position < len(text):
        found = _construct_at(text, position)
        if found is None:
            literal.append(text[position])
            position += 1
            continue
        node, position = found
        emit(node)
    if literal:
        nodes.append(Text("".join(literal)))
    return tuple(nodes)


def _construct_at(text: str, start: int) -> tuple[Inline, int] | None:
    char = text[start]
    if char == "`":
        return _code_at(text, start)
    if char == "[":
        link = _LINK.match(text, start)
        if link is None:
            return None
        return Link(parse_inline(link["text"]), link["url"], link[0]), link.end()
    for delimiter, style in _DELIMITERS:
        if text.startswith(delimiter, start):
            end = _closing(text, start, delimiter)
            if end is None:
                continue
            inner = text[start + len(delimiter) : end]
            return Styled(style, parse_inline(inner)), end + len(delimiter)
    return None


def _code_at(text: str, start: int) -> tuple[Inline, int] | None:
    run = _tick_run(text, start)
    ticks = text[start : start + run]
    search = start + run
    while (end := text.find(ticks, search)) != -1:
        after = end + run
        if after < len(text) and text[after] == "`":
            search = after + _tick_run(text, after)
            continue
        body = text[start + run : end]
        if not body.strip():
            return None
        if body.startswith(" ") and body.endswith(" ") and len(body) > 2:
            body = body[1:-1]
        return Code(body), after
    return None


def _tick_run(text: str, start: int) -> int:
    rest = text[start:]
    return len(rest) - len(rest.lstrip("`"))


def _closing(text: str, start: int, delimiter: str) -> int | None:
    """Where ``delimiter`` opened at ``start`` closes, or None when it does not open a span here."""
    width = len(delimiter)
    content = start + width
    if content >= len(text) or text[content].isspace() or text[content] == delimiter[0]:
        return None
    if delimiter[0] == "_" and start > 0 and text[start - 1].isalnum():
        return None
    search = content + 1
    while (end := text.find(delimiter, search)) != -1:
        after = end + width
        valid = not text[end - 1].isspace()
        if width == 1 and (text[end - 1] == delimiter or text[after : after + 1] == delimiter):
            valid = False  # part of a double delimiter nested inside the single one
        if delimiter[0] == "_" and after < len(text) and text[after].isalnum():
            valid = False  # snake_case words are not emphasis
        if valid:
            return end
        search = end + 1
    return None
