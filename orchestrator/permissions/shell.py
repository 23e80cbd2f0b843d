"""The shell reader: a command line lexed and parsed the way a POSIX shell reads it.

Quotes, escapes, ``$(...)``, backticks and here-documents are understood, and the line is split into
simple commands at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and subshell parentheses. The scripts
a word runs (substitutions) and the text a shell expands (``${...}``, here-document bodies) are kept
for the caller to inspect.

``shlex`` is not used for the lexing: it cannot tell a quoted ``';'`` from the operator ``;`` and does
not see a ``$(...)`` inside double quotes, both of which a shell executes differently.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from orchestrator.permissions.options import split_words

_OPERATORS = sorted(
    [*split_words("&& || ;;& ;; ;& |& &>> &> >> >| >& <& <<< <<- << <> < > | & ; ( )"), "\n"], key=len
)[::-1]
_OPERATOR_CHARS = frozenset("|&;<>()\n")
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<<", "<<-", "<<<", ">&", "<&", "&>", "&>>"})
INPUT_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&"})
RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
"""Reserved words that may start a command and are not part of it."""
_IFS = re.compile(r"\$\{IFS\}|\$IFS(?![A-Za-z0-9_])")
_SUBSTITUTED = "$(...)"


class CommandParseError(ValueError):
    """The command line is not valid shell syntax (an unterminated quote or substitution)."""


@dataclass
class Script:
    """A parsed command line: its simple commands and the nested text a shell would run or expand."""

    commands: list[Simple] = field(default_factory=list)
    substitutions: list[str] = field(default_factory=list)
    """Scripts that run to produce a word: ``$(...)``, backticks, ``<(...)``."""
    expansions: list[str] = field(default_factory=list)
    """The insides of ``${...}`` and ``$((...))``: not scripts, but substitutions may hide there."""
    heredocs: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: its words (reserved words dropped) and its ``(operator, target)`` redirects."""

    words: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Token:
    op: bool
    text: str
    quoted: bool = False


def _closing(text: str, start: int, opening: str, closing: str) -> int:
    """Index of the bracket closing the one at ``start``, skipping quoted text and escapes."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                break
            i = end + 1
            continue
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise CommandParseError(f"unbalanced {opening!r} at offset {start}")


def _backtick_end(text: str, start: int) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return i
        i += 1
    raise CommandParseError(f"unterminated backtick at offset {start - 1}")


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = _IFS.sub(" ", text.replace("\\\n", ""))
        self.tokens: list[_Token] = []
        self.script = Script()
        self._word: list[str] | None = None
        self._quoted = False
        self._heredoc_next: bool | None = None
        self._heredocs: list[tuple[str, bool, bool]] = []

    def _part(self, text: str, *, quoted: bool = False) -> None:
        if self._word is None:
            self._word = []
        self._word.append(text)
        self._quoted = self._quoted or quoted

    def _flush(self) -> None:
        if self._word is None:
            return
        word = "".join(self._word)
        if self._heredoc_next is not None:
            self._heredocs.append((word, self._quoted, self._heredoc_next))
            self._heredoc_next = None
        self.tokens.append(_Token(False, word, self._quoted))
        self._word = None
        self._quoted = False

    def _expansion(self, i: int) -> int | None:
        """Handle ``$((``, ``$(``, ``${`` or a backtick at ``i``; the index after it, or None."""
        text = self.text
        if text.startswith("$((", i):
            end = _closing(text, i + 1, "(", ")")
            self.script.expansions.append(text[i + 3 : end - 1])
            self._part(text[i : end + 1])
            return end + 1
        if text.startswith("$(", i):
            end = _closing(text, i + 1, "(", ")")
            self.script.substitutions.append(text[i + 2 : end])
            self._part(_SUBSTITUTED)
            return end + 1
        if text.startswith("${", i):
            end = _closing(text, i + 1, "{", "}")
            self.script.expansions.append(text[i + 2 : end])
            self._part(text[i : end + 1])
            return end + 1
        if text[i] == "`":
            end = _backtick_end(text, i + 1)
            inner = re.sub(r"\\([`$\\])", r"\1", text[i + 1 : end])
            self.script.substitutions.append(inner)
            self._part(_SUBSTITUTED)
            return end + 1
        return None

    def _double_quoted(self, i: int, *, closing: str | None = '"') -> int:
        """Read expanding text (a double-quoted string or a here-document body) from ``i``."""
        text = self.text
        while i < len(text):
            c = text[i]
            if closing is not None and c == closing:
                return i + 1
            if c == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\':
                self._part(text[i + 1], quoted=True)
                i += 2
                continue
            after = self._expansion(i) if c in "$`" else None
            if after is not None:
                i = after
                continue
            self._part(c, quoted=True)
            i += 1
        if closing is not None:
            raise CommandParseError("unterminated double quote")
        return i

    def expanding(self) -> Script:
        """Read the whole text as the inside of double quotes (a here-document body, ``${...}``)."""
        self._double_quoted(0, closing=None)
        return self.script

    def _ansi_c(self, i: int) -> int:
        text = self.text
        j = i + 2
        while j < len(text) and text[j] != "'":
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise CommandParseError("unterminated $'...' string")
        raw = text[i + 2 : j]
        try:
            # Decoding the escapes matters: $'\x72\x6d' is how one spells rm without the letters.
            decoded = codecs.decode(raw.encode("latin-1", "backslashreplace"), "unicode_escape")
        except (UnicodeDecodeError, ValueError):
            decoded = raw
        self._part(decoded, quoted=True)
        return j + 1

    def _heredoc_bodies(self, i: int) -> int:
        text = self.text
        for delimiter, quoted, strip_tabs in self._heredocs:
            body: list[str] = []
            while i < len(text):
                end = text.find("\n", i)
                line = text[i:] if end < 0 else text[i:end]
                i = len(text) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            joined = "\n".join(body)
            self.script.heredocs.append(joined)
            if not quoted:
                self.script.expansions.append(joined)
        self._heredocs = []
        return i

    def _operator(self, i: int) -> int:
        text = self.text
        op = next(o for o in _OPERATORS if text.startswith(o, i))
        pending = "".join(self._word) if self._word is not None else None
        if op[0] in "<>" and pending is not None and pending.isdigit() and not self._quoted:
            self._word = None
            self.tokens.append(_Token(True, pending + op))
        else:
            self._flush()
            self.tokens.append(_Token(True, op))
        if op in ("<<", "<<-"):
            self._heredoc_next = op == "<<-"
        i += len(op)
        if op == "\n" and self._heredocs:
            i = self._heredoc_bodies(i)
        return i

    def run(self) -> _Lexer:
        text = self.text
        i = 0
        while i < len(text):
            c = text[i]
            if c in " \t\r":
                self._flush()
                i += 1
            elif c == "#" and self._word is None:
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            elif c == "\\":
                self._part(text[i + 1 : i + 2], quoted=True)
                i += 2
            elif c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise CommandParseError("unterminated single quote")
                self._part(text[i + 1 : end], quoted=True)
                i = end + 1
            elif text.startswith("$'", i):
                i = self._ansi_c(i)
            elif c == '"':
                self._part("", quoted=True)
                i = self._double_quoted(i + 1)
            elif c in "<>" and text.startswith("(", i + 1):
                end = _closing(text, i + 1, "(", ")")
                self.script.substitutions.append(text[i + 2 : end])
                self._part(_SUBSTITUTED)
                i = end + 1
            elif c in "$`" and (after := self._expansion(i)) is not None:
                i = after
            elif c in _OPERATOR_CHARS:
                i = self._operator(i)
            else:
                self._part(c)
                i += 1
        self._flush()
        if self._heredoc_next is not None:
            raise CommandParseError("here-document operator without a delimiter")
        if self._heredocs:
            self._heredoc_bodies(len(text))
        return self


def _lex(text: str) -> _Lexer:
    return _Lexer(text).run()


def parse(text: str) -> Script:
    """Parse ``text`` as a shell command line; raises ``CommandParseError`` when it is not valid shell."""
    lexer = _lex(text)
    script = lexer.script
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    pending: str | None = None
    for token in lexer.tokens:
        if token.op and token.text.lstrip("0123456789") in _REDIRECTS:
            if pending is not None:
                raise CommandParseError(f"redirection {pending!r} without a target")
            pending = token.text
        elif token.op:
            if pending is not None:
                raise CommandParseError(f"redirection {pending!r} without a target")
            if words or redirects:
                script.commands.append(Simple(tuple(words), tuple(redirects)))
            words, redirects = [], []
        elif pending is not None:
            redirects.append((pending, token.text))
            pending = None
        elif not token.quoted and not words and token.text in RESERVED:
            continue
        else:
            words.append(token.text)
    if pending is not None:
        raise CommandParseError(f"redirection {pending!r} without a target")
    if words or redirects:
        script.commands.append(Simple(tuple(words), tuple(redirects)))
    return script


def parse_lenient(text: str) -> Script:
    """A crude split for text that is not valid shell: quotes dropped, every operator a separator."""
    script = Script()
    for piece in re.split(r"\$\(|[;&|()\n`<>]", text):
        words = re.sub(r"[\"'\\]", "", piece).split()
        if words:
            script.commands.append(Simple(tuple(words), ()))
    return script


def parse_expanding(text: str) -> Script:
    """Read ``text`` as the inside of double quotes (a here-document body, ``${...}``)."""
    return _Lexer(text).expanding()
