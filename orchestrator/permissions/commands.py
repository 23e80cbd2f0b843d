"""Shell command analysis: is a command line read-only, and is any part of it destructive?

The command is lexed the way a POSIX shell reads it (quotes, escapes, ``$(...)``, backticks,
here-documents), split into simple commands at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and
subshell parentheses, and every nested script (command substitutions, ``sh -c``, ``eval``,
``xargs``, ``find -exec``, ``sudo``/``env``/``timeout``... prefixes) is inspected too.

``shlex`` is not used for the lexing: it cannot tell a quoted ``';'`` from the operator ``;`` and does
not see a ``$(...)`` inside double quotes, both of which a shell executes differently.

Both questions fail safe: a command that cannot be parsed is never read-only, and the destructive
check then falls back to a lenient word split so that ``rm -rf / "`` is still caught.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


MAX_DEPTH = 8
"""Nesting (``sh -c`` in ``$(...)`` in ``eval`` ...) beyond which a command is not inspected further."""

_OPERATORS = sorted(
    [*_words("&& || ;;& ;; ;& |& &>> &> >> >| >& <& <<< <<- << <> < > | & ; ( )"), "\n"], key=len
)[::-1]
_OPERATOR_CHARS = frozenset("|&;<>()\n")
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<<", "<<-", "<<<", ">&", "<&", "&>", "&>>"})
_INPUT_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<&"})
_RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
_HEADERS = frozenset({"for", "select", "case", "esac"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_IFS = re.compile(r"\$\{IFS\}|\$IFS(?![A-Za-z0-9_])")
_SUBSTITUTED = "$(...)"
_TRUSTED_BIN_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")


class CommandParseError(ValueError):
    """The command line is not valid shell syntax (an unterminated quote or substitution)."""


class _TooDeep(Exception):
    pass


# -- lexing ----------------------------------------------------------------------------------------


@dataclass
class _Script:
    commands: list[_Simple] = field(default_factory=list)
    substitutions: list[str] = field(default_factory=list)
    """Scripts that run to produce a word: ``$(...)``, backticks, ``<(...)``."""
    expansions: list[str] = field(default_factory=list)
    """The insides of ``${...}`` and ``$((...))``: not scripts, but substitutions may hide there."""
    heredocs: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Simple:
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
        self.script = _Script()
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

    def expanding(self) -> _Script:
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


def _parse(text: str) -> _Script:
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
                script.commands.append(_Simple(tuple(words), tuple(redirects)))
            words, redirects = [], []
        elif pending is not None:
            redirects.append((pending, token.text))
            pending = None
        elif not token.quoted and not words and token.text in _RESERVED:
            continue
        else:
            words.append(token.text)
    if pending is not None:
        raise CommandParseError(f"redirection {pending!r} without a target")
    if words or redirects:
        script.commands.append(_Simple(tuple(words), tuple(redirects)))
    return script


def _parse_lenient(text: str) -> _Script:
    """A crude split for text that is not valid shell: quotes dropped, every operator a separator."""
    script = _Script()
    for piece in re.split(r"\$\(|[;&|()\n`<>]", text):
        words = re.sub(r"[\"'\\]", "", piece).split()
        if words:
            script.commands.append(_Simple(tuple(words), ()))
    return script


# -- option parsing --------------------------------------------------------------------------------


@dataclass
class _Opts:
    short: set[str] = field(default_factory=set)
    long: set[str] = field(default_factory=set)
    values: dict[str, list[str]] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    rest: tuple[str, ...] = ()
    """With ``stop=True``: the arguments from the first positional on (a wrapped command)."""

    def has(self, *names: str) -> bool:
        """Whether any of the options (``-x`` or ``--long``) was given."""
        return any(name in self.long if name.startswith("--") else name[1:] in self.short for name in names)

    def value(self, *names: str) -> list[str]:
        return [v for name in names for v in self.values.get(name, [])]


def _opts(
    args: Sequence[str], short_values: str = "", long_values: Sequence[str] = (), *, stop: bool = False
) -> _Opts:
    """Getopt-style parsing: bundled short flags, ``--long[=value]``, ``--``.

    Options may follow positionals (GNU permutation) unless ``stop``, which ends at the first positional.
    """
    result = _Opts()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            if stop:
                result.rest = tuple(args[i + 1 :])
            else:
                result.positionals.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            result.long.add(name)
            if eq:
                result.values.setdefault(name, []).append(value)
            elif name in long_values and i + 1 < len(args):
                result.values.setdefault(name, []).append(args[i + 1])
                i += 1
        elif arg.startswith("-") and len(arg) > 1:
            for k, ch in enumerate(arg[1:], start=1):
                result.short.add(ch)
                if ch in short_values:
                    value = arg[k + 1 :]
                    if not value and i + 1 < len(args):
                        value = args[i + 1]
                        i += 1
                    result.values.setdefault(ch, []).append(value)
                    break
        elif stop:
            result.rest = tuple(args[i:])
            break
        else:
            result.positionals.append(arg)
        i += 1
    return result


# -- walking every command -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Command:
    name: str
    path: str
    args: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]
    via: str = ""
    """The program that runs this one with arguments of its own choosing (``xargs``, ``find``)."""


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh"})


def _shell_script(args: Sequence[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (options may be bundled: ``-lc``, ``-ec``), else None."""
    wants_script = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--rcfile", "--init-file") or arg in ("-o", "+o"):
            i += 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        if arg[:1] in "-+" and len(arg) > 1:
            wants_script = wants_script or "c" in arg[1:]
            i += 1
            continue
        return arg if wants_script else None
    return None


def _inner(name: str, args: tuple[str, ...]) -> tuple[list[tuple[str, tuple[str, ...]]], list[str]]:
    """What a command runs itself: ([(via, command words)], [scripts to parse]).

    ``via`` names a program that hands the inner command arguments of its own choosing
    (``xargs``, ``find -exec``); it is empty for prefixes that run the command as written.
    """
    if name in ("sudo", "doas"):
        opts = _opts(args, "ughprtUCDT", ("--user", "--group", "--host", "--prompt", "--chdir"), stop=True)
        if opts.has("-e", "--edit"):
            return [("", ("sudoedit", *opts.rest))], []
        return ([("", opts.rest)] if opts.rest else []), []
    if name == "env":
        opts = _opts(args, "uCS", ("--unset", "--chdir", "--split-string"), stop=True)
        rest = opts.rest
        while rest and _ASSIGNMENT.match(rest[0]):
            rest = rest[1:]
        if split := opts.value("S", "--split-string"):
            return [], [" ".join((*split, *rest))]
        return ([("", rest)] if rest else []), []
    if name in _WRAPPERS:
        short_values, long_values, positional = _WRAPPERS[name]
        opts = _opts(args, short_values, long_values, stop=True)
        if name == "command" and opts.has("-v", "-V"):
            return [], []
        rest = opts.rest[positional:]
        if name == "xargs":
            return [("xargs", rest or ("echo",))], []
        return ([("", rest)] if rest else []), []
    if name in _SHELLS:
        script = _shell_script(args)
        return [], [script] if script is not None else []
    if name == "eval":
        return [], [" ".join(args)]
    if name == "watch":
        opts = _opts(args, "nd", ("--interval", "--differences"), stop=True)
        return [], [" ".join(opts.rest)] if opts.rest else []
    if name == "find":
        commands: list[tuple[str, tuple[str, ...]]] = []
        i = 0
        while i < len(args):
            if args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = i + 1
                while end < len(args) and args[end] not in (";", "+"):
                    end += 1
                commands.append(("find -exec", args[i + 1 : end]))
                i = end
            i += 1
        return commands, []
    return [], []


_WRAPPERS: dict[str, tuple[str, tuple[str, ...], int]] = {
    # name: (short options taking a value, long options taking a value, positionals before the command)
    "nice": ("n", ("--adjustment",), 0),
    "ionice": ("cnpPu", ("--class", "--classdata", "--pid", "--pgid", "--uid"), 0),
    "nohup": ("", (), 0),
    "time": ("fo", ("--format", "--output"), 0),
    "timeout": ("sk", ("--signal", "--kill-after"), 1),
    "stdbuf": ("ioe", ("--input", "--output", "--error"), 0),
    "command": ("", (), 0),
    "builtin": ("", (), 0),
    "exec": ("a", (), 0),
    "setsid": ("", (), 0),
    "busybox": ("", (), 0),
    "xargs": (
        "adEILnPs",
        ("--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"),
        0,
    ),
}


def _strip_prefix(words: Sequence[str]) -> tuple[str, ...]:
    """The command without reserved words, variable assignments and a ``function NAME`` header."""
    i = 0
    while i < len(words):
        if words[i] == "function":
            i += 2
        elif words[i] in _RESERVED or _ASSIGNMENT.match(words[i]):
            i += 1
        else:
            break
    rest = tuple(words[i:])
    if rest and rest[0] in _HEADERS:
        return ()
    return rest


def _walk(text: str, depth: int, *, lenient: bool) -> Iterator[_Command]:
    """Every command the line runs, nested ones included, in reading order."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    try:
        script = _parse(text)
    except CommandParseError:
        if not lenient:
            raise
        script = _parse_lenient(text)
    yield from _walk_nested(script, depth, lenient=lenient)
    stdin_shell = False
    fed: list[str] = list(script.heredocs)
    for simple in script.commands:
        for command in _expand(simple.words, simple.redirects, depth, lenient=lenient):
            yield command
            if command.name in _SHELLS and not any(arg[:1] not in "-+" for arg in command.args):
                stdin_shell = True
            if command.name in ("echo", "printf"):
                fed.append(" ".join(command.args))
            fed.extend(target for op, target in command.redirects if op.endswith("<<<"))
    if stdin_shell:
        # `echo 'rm -rf /' | sh`, `sh <<EOF`, `bash <<< '...'`: what the shell reads is a script too.
        for text in fed:
            yield from _walk(text, depth + 1, lenient=lenient)


def _walk_nested(script: _Script, depth: int, *, lenient: bool) -> Iterator[_Command]:
    for substitution in script.substitutions:
        yield from _walk(substitution, depth + 1, lenient=lenient)
    for text in script.expansions:
        if depth + 1 > MAX_DEPTH:
            raise _TooDeep
        try:
            nested = _Lexer(text).expanding()
        except CommandParseError:
            if not lenient:
                raise
            yield from _walk(text, depth + 1, lenient=True)
            continue
        yield from _walk_nested(nested, depth + 1, lenient=lenient)


def _expand(
    words: Sequence[str], redirects: tuple[tuple[str, str], ...], depth: int, *, lenient: bool, via: str = ""
) -> Iterator[_Command]:
    if depth > MAX_DEPTH:
        raise _TooDeep
    words = _strip_prefix(words)
    if not words:
        if redirects:
            yield _Command("", "", (), redirects, via)
        return
    path, args = words[0], tuple(words[1:])
    name = path.rsplit("/", 1)[-1] if "/" in path.rstrip("/") else path
    yield _Command(name, path, args, redirects, via)
    commands, scripts = _inner(name, args)
    for inner_via, inner in commands:
        yield from _expand(inner, (), depth + 1, lenient=lenient, via=inner_via or via)
    for script in scripts:
        yield from _walk(script, depth + 1, lenient=lenient)


# -- destructive -----------------------------------------------------------------------------------

_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|dm-|md|loop|mapper/|sr)")
_HARMLESS_DEVICES = re.compile(r"^/dev/(null|zero|stdout|stderr|tty|fd/\d+)$")
_SYSTEM_ROOTS = frozenset(
    _words("/ /* ~ /bin /boot /dev /etc /home /lib /lib64 /opt /root /sbin /srv /usr /var")
)
_SQL_DROP = re.compile(r"\bDROP\s+(TABLE|DATABASE|SCHEMA)\b", re.IGNORECASE)
_SQL_TRUNCATE = re.compile(r"\bTRUNCATE\s+(TABLE\s+)?(ONLY\s+)?[\w\"`\[]", re.IGNORECASE)
_SQL_DELETE = re.compile(
    r"\bDELETE\s+FROM\s+(?:\"[^\"]*\"|`[^`]*`|\[[^]]*\]|[\w.$]+)(?P<rest>[^;'\"]*)", re.IGNORECASE
)
_FUNCTION_BODY = re.compile(r"\(\s*\)\s*\{(?P<body>[^}]{0,200})\}")
_FUNCTION_NAME = re.compile(r"([^\s(){}|&;<>]+)\s*$")


def _git_split(args: Sequence[str]) -> tuple[str, tuple[str, ...], _Opts]:
    """``git [global options] SUBCOMMAND ARGS``: the subcommand, its arguments and the global options."""
    opts = _opts(args, "Cc", ("--git-dir", "--work-tree", "--namespace", "--config-env"), stop=True)
    if not opts.rest:
        return "", (), opts
    return opts.rest[0], tuple(opts.rest[1:]), opts


def _git_reason(args: tuple[str, ...]) -> str | None:
    sub, rest, _ = _git_split(args)
    if "--no-verify" in rest:
        return f"git {sub} --no-verify skips the repository's hooks"
    if sub == "reset":
        return "git reset --hard discards uncommitted work" if "--hard" in rest else None
    if sub == "push":
        return _git_push_reason(rest)
    if sub == "clean":
        opts = _opts(rest, "eX", ("--exclude",))
        if opts.has("-f", "--force") and not opts.has("-n", "--dry-run"):
            return "git clean -f deletes untracked files"
        return None
    if sub in ("checkout", "restore"):
        opts = _opts(rest, "bBsp" if sub == "checkout" else "sp", ("--source", "--pathspec-from-file"))
        everything = any(p in (".", "./", ":/", "*", ":/*") for p in opts.positionals)
        if sub == "restore" and opts.has("-S", "--staged") and not opts.has("-W", "--worktree"):
            return None
        if everything:
            return f"git {sub} . discards every uncommitted change"
        if sub == "checkout" and opts.has("-f", "--force"):
            return "git checkout --force discards uncommitted changes"
        return None
    if sub == "stash":
        return f"git stash {rest[0]} deletes stashed work" if rest[:1] in (("drop",), ("clear",)) else None
    if sub == "branch":
        opts = _opts(rest)
        if opts.has("-D") or (opts.has("-d", "--delete") and opts.has("-f", "--force")):
            return "git branch -D deletes a branch even when it is not merged"
        return None
    if sub == "commit":
        opts = _opts(rest, "mCcFtS", ("--message", "--file", "--author", "--date", "--reuse-message"))
        if opts.has("--amend"):
            return "git commit --amend rewrites the last commit"
        if opts.has("-n"):
            return "git commit -n skips the repository's hooks"
    return None


def _git_push_reason(rest: tuple[str, ...]) -> str | None:
    opts = _opts(rest, "o", ("--push-option", "--repo", "--receive-pack", "--exec"))
    if opts.has("-f", "--force", "--force-with-lease", "--force-if-includes"):
        return "git push --force rewrites the remote branch's history"
    refspecs = opts.positionals[1:]
    if any(ref.startswith("+") for ref in opts.positionals):
        return "git push +refspec force-updates a remote branch"
    if opts.has("-d", "--delete") or any(ref.startswith(":") for ref in refspecs):
        return "git push --delete deletes a remote branch"
    if opts.has("--mirror", "--prune"):
        return "git push --mirror/--prune deletes remote branches missing locally"
    return None


def _rm_reason(args: tuple[str, ...]) -> str | None:
    opts = _opts(args)
    if opts.has("-r", "-R", "-f", "--recursive", "--force"):
        return "rm -r/-f deletes files and directories without asking"
    return None


def _find_reason(args: tuple[str, ...]) -> str | None:
    return "find -delete deletes every file it matches" if "-delete" in args else None


def _dd_reason(args: tuple[str, ...]) -> str | None:
    for arg in args:
        if arg.startswith("of=/dev/") and not _HARMLESS_DEVICES.match(arg[3:]):
            return f"dd {arg} overwrites a device"
    return None


def _truncate_reason(args: tuple[str, ...]) -> str | None:
    opts = _opts(args, "so", ("--size", "--reference"))
    for size in opts.value("s", "--size"):
        if re.fullmatch(r"0+[KMGTPEZY]?(i?B)?", size) or size[:1] in ("-", "<"):
            return f"truncate -s {size} throws away file contents"
    return None


def _ownership_reason(name: str) -> Callable[[tuple[str, ...]], str | None]:
    def reason(args: tuple[str, ...]) -> str | None:
        opts = _opts(args, "", ("--reference", "--from"))
        if not opts.has("-R", "--recursive"):
            return None
        targets = opts.positionals if opts.has("--reference") else opts.positionals[1:]
        for target in targets:
            if (target.rstrip("/") or "/") in _SYSTEM_ROOTS:
                return f"{name} -R on {target} changes a whole system tree"
        return None

    return reason


def _subcommand_reason(
    name: str, verb: str, short_values: str, long_values: tuple[str, ...]
) -> Callable[[tuple[str, ...]], str | None]:
    def reason(args: tuple[str, ...]) -> str | None:
        opts = _opts(args, short_values, long_values)
        return f"{name} {verb} deletes live resources" if opts.positionals[:1] == [verb] else None

    return reason


def _terraform_reason(args: tuple[str, ...]) -> str | None:
    positionals = [arg for arg in args if not arg.startswith("-")]
    if positionals[:1] == ["destroy"]:
        return "terraform destroy deletes the managed infrastructure"
    destroying = any(
        arg.lstrip("-") == "destroy" or arg.lstrip("-").lower() == "destroy=true" for arg in args
    )
    if positionals[:1] == ["apply"] and destroying:
        return "terraform apply -destroy deletes the managed infrastructure"
    return None


_KUBECTL_VALUES = _words(
    "--namespace --context --kubeconfig --cluster --user --server --token --as --request-timeout "
    "--selector --filename --output"
)

_DESTRUCTIVE: dict[str, Callable[[tuple[str, ...]], str | None]] = {
    "rm": _rm_reason,
    "git": _git_reason,
    "find": _find_reason,
    "dd": _dd_reason,
    "truncate": _truncate_reason,
    "shred": lambda args: "shred overwrites files beyond recovery",
    "wipefs": lambda args: "wipefs erases file-system signatures",
    "mke2fs": lambda args: "mke2fs formats a file system",
    "chmod": _ownership_reason("chmod"),
    "chown": _ownership_reason("chown"),
    "chgrp": _ownership_reason("chgrp"),
    "kubectl": _subcommand_reason("kubectl", "delete", "nsfl", _KUBECTL_VALUES),
    "oc": _subcommand_reason("oc", "delete", "nsfl", _KUBECTL_VALUES),
    "terraform": _terraform_reason,
    "tofu": _terraform_reason,
}


def _command_reason(command: _Command) -> str | None:
    for op, target in command.redirects:
        if op.lstrip("0123456789&") not in _INPUT_REDIRECTS and _DEVICE.match(target):
            return f"writing to {target} destroys the file system on it"
    if command.name == "rm" and command.via:
        return f"{command.via} rm deletes every file it is handed"
    if command.name.startswith("mkfs"):
        return f"{command.name} formats a file system"
    check = _DESTRUCTIVE.get(command.name)
    return check(command.args) if check is not None else None


def _text_reason(text: str) -> str | None:
    for match in _FUNCTION_BODY.finditer(text):
        # The name is looked for just before `()`: a pattern anchored on the name would be quadratic.
        named = _FUNCTION_NAME.search(text, max(0, match.start() - 200), match.start())
        if named is None or "&" not in match["body"]:
            continue
        name = re.escape(named[1])
        if re.search(rf"(?<![\w:]){name}\s*\|\s*{name}(?![\w:])", match["body"]):
            return "a fork bomb exhausts the machine's processes"
    return None


def _sql_reason(text: str) -> str | None:
    if match := _SQL_DROP.search(text):
        return f"SQL DROP {match[1].upper()} deletes it with all its data"
    if _SQL_TRUNCATE.search(text):
        return "SQL TRUNCATE deletes every row of a table"
    for match in _SQL_DELETE.finditer(text):
        if not re.search(r"\bWHERE\b", match["rest"], re.IGNORECASE):
            return "SQL DELETE FROM without WHERE deletes every row of a table"
    return None


def destructive_reason(command: str) -> str | None:
    """Why ``command`` destroys data or history (a short sentence), or None when nothing is found."""
    if reason := _text_reason(command):
        return reason
    try:
        commands = list(_walk(command, 0, lenient=True))
    except _TooDeep:
        return f"shell commands nested more than {MAX_DEPTH} levels deep cannot be inspected"
    for cmd in commands:
        if reason := _command_reason(cmd):
            return reason
    # SQL in an argument of grep or echo is text; handed to anything else it may be executed.
    if any(not _read_only_name(cmd.name) for cmd in commands):
        return _sql_reason(command)
    return None


# -- read-only -------------------------------------------------------------------------------------

_SED_WRITES = re.compile(r"(^|[^\\A-Za-z])[wWe]([^A-Za-z]|$)")


def _always(args: tuple[str, ...]) -> bool:
    return True


def _find_read_only(args: tuple[str, ...]) -> bool:
    actions = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
    return not actions.intersection(args)


def _sed_read_only(args: tuple[str, ...]) -> bool:
    opts = _opts(args, "efl", ("--expression", "--file", "--line-length"))
    if opts.has("-i", "--in-place", "-f", "--file"):
        return False
    scripts = opts.value("e", "--expression") or opts.positionals[:1]
    return bool(scripts) and not any(_SED_WRITES.search(script) for script in scripts)


def _without(
    short_values: str, long_values: tuple[str, ...], *refused: str
) -> Callable[[tuple[str, ...]], bool]:
    def check(args: tuple[str, ...]) -> bool:
        return not _opts(args, short_values, long_values).has(*refused)

    return check


def _uniq_read_only(args: tuple[str, ...]) -> bool:
    # ``uniq IN OUT`` writes OUT.
    return len(_opts(args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars")).positionals) <= 1


def _shell_read_only(args: tuple[str, ...]) -> bool:
    return _shell_script(args) is not None


_GIT_LIST_VALUES = _words("--contains --no-contains --merged --no-merged --points-at --sort --format")


def _git_read_only(args: tuple[str, ...]) -> bool:
    sub, rest, global_opts = _git_split(args)
    if global_opts.has("-c", "--config-env", "--exec-path"):
        return False  # -c core.pager=... runs a program
    opts = _opts(rest)
    if opts.has("--output", "--ext-diff"):
        return False
    if sub in ("status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "shortlog"):
        return True
    if sub == "branch":
        refused = _words(
            "-d -D -m -M -c -C -f -u -t --delete --move --copy --force --set-upstream-to --unset-upstream "
            "--edit-description --track --no-track --create-reflog"
        )
        opts = _opts(rest, "", _GIT_LIST_VALUES)
        return not opts.has(*refused) and (not opts.positionals or opts.has("-l", "--list"))
    if sub == "tag":
        refused = _words(
            "-d -a -s -m -f -F -u -e --delete --annotate --sign --message --file --force --local-user --edit "
            "--create-reflog"
        )
        opts = _opts(rest, "n", _GIT_LIST_VALUES)
        listing = opts.has("-l", "--list", "-v", "--verify")
        return not opts.has(*refused) and (not opts.positionals or listing)
    if sub == "remote":
        opts = _opts(rest)
        return not opts.positionals or opts.positionals[0] in ("get-url", "show")
    if sub == "config":
        opts = _opts(rest, "f", ("--file", "--blob", "--type", "--default"))
        reading = opts.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l")
        writing = opts.has(
            *_words("--add --unset --unset-all --replace-all --rename-section --remove-section -e --edit")
        )
        return not writing and (reading or opts.positionals[:1] in (["get"], ["list"]))
    return False


_READ_ONLY: dict[str, Callable[[tuple[str, ...]], bool]] = {
    **dict.fromkeys(
        _words(
            "ls cat head tail wc grep egrep fgrep pwd echo printf whoami id uname stat du df which type cut "
            "tr diff cmp basename dirname realpath readlink true false test [ env nice ionice timeout stdbuf "
            "command builtin exec setsid xargs eval"
        ),
        _always,
    ),
    "find": _find_read_only,
    "sed": _sed_read_only,
    "rg": _without("", (), "--pre"),
    "sort": _without(
        "kotST", ("--key", "--output", "--field-separator"), "-o", "--output", "--compress-program"
    ),
    "uniq": _uniq_read_only,
    "tree": _without("LPIoHT", ("--filelimit", "--charset", "--timefmt"), "-o"),
    "date": _without("dfrs", ("--date", "--file", "--reference", "--set"), "-s", "--set"),
    "file": _without("mfFeP", (), "-C", "--compile"),
    "time": _without("fo", ("--format", "--output"), "-o", "--output"),
    "git": _git_read_only,
    **dict.fromkeys(_SHELLS, _shell_read_only),
}
_CHECKSUM = re.compile(r"^(sha\d*|b2|md5)sum$")


def _read_only_name(name: str) -> bool:
    return name in _READ_ONLY or bool(_CHECKSUM.match(name))


def _redirects_read_only(redirects: tuple[tuple[str, str], ...]) -> bool:
    for op, target in redirects:
        base = op.lstrip("0123456789")
        if base in _INPUT_REDIRECTS:
            continue
        if base == ">&" and (target.isdigit() or target == "-"):
            continue
        if target != "/dev/null":
            return False
    return True


def _command_read_only(command: _Command) -> bool:
    if not _redirects_read_only(command.redirects):
        return False
    if "/" in command.path and not command.path.startswith(_TRUSTED_BIN_DIRS):
        return False  # ./ls is whatever the working directory holds
    if _CHECKSUM.match(command.name):
        return True
    check = _READ_ONLY.get(command.name)
    return check is not None and check(command.args)


def is_read_only_command(command: str) -> bool:
    """True only when every command the line runs, nested ones included, is known to change nothing."""
    try:
        commands = list(_walk(command, 0, lenient=False))
    except (CommandParseError, _TooDeep):
        return False
    return bool(commands) and all(_command_read_only(cmd) for cmd in commands)


def edits_in_place(command: str) -> bool:
    """True when the line runs ``sed -i`` (or ``--in-place``) anywhere."""
    try:
        commands = list(_walk(command, 0, lenient=True))
    except _TooDeep:
        return False
    return any(cmd.name == "sed" and _opts(cmd.args, "efl").has("-i", "--in-place") for cmd in commands)
