"""Every command a line runs: simple commands, and the commands nested in them.

Nested scripts are followed into command substitutions, ``sh -c``, ``eval``, ``watch``, text fed to a
shell's standard input, and the commands that prefixes run (``sudo``, ``env``, ``timeout``, ``nice``...)
or hand arguments of their own choosing (``xargs``, ``find -exec``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from orchestrator.permissions.options import parse_opts
from orchestrator.permissions.shell import (
    RESERVED,
    CommandParseError,
    Script,
    parse,
    parse_expanding,
    parse_lenient,
)

MAX_DEPTH = 8
"""Nesting (``sh -c`` in ``$(...)`` in ``eval`` ...) beyond which a command is not inspected further."""

_HEADERS = frozenset({"for", "select", "case", "esac"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")


class TooDeep(Exception):
    """Commands are nested more than ``MAX_DEPTH`` levels deep."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command as it will run: its name (``path`` without directories), arguments and redirects."""

    name: str
    path: str
    args: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]
    via: str = ""
    """The program that runs this one with arguments of its own choosing (``xargs``, ``find``)."""
    assignments: tuple[str, ...] = ()
    """``NAME=value`` words it runs with: written before it, given to ``env``, or inherited from a
    wrapper it runs under (``FOO=1 command git status`` runs git with ``FOO=1``)."""


SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh"})


def shell_script(args: Sequence[str]) -> str | None:
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
        opts = parse_opts(
            args, "ughprtUCDT", ("--user", "--group", "--host", "--prompt", "--chdir"), stop=True
        )
        if opts.has("-e", "--edit"):
            return [("", ("sudoedit", *opts.rest))], []
        return ([("", opts.rest)] if opts.rest else []), []
    if name == "env":
        opts = parse_opts(args, "uCS", ("--unset", "--chdir", "--split-string"), stop=True)
        if split := opts.value("S", "--split-string"):
            return [], [" ".join((*split, *opts.rest))]
        # The assignments stay in front of the command: _expand hands them to it.
        return ([("", opts.rest)] if opts.rest else []), []
    if name in _WRAPPERS:
        short_values, long_values, positional = _WRAPPERS[name]
        opts = parse_opts(args, short_values, long_values, stop=True)
        if name == "command" and opts.has("-v", "-V"):
            return [], []
        rest = opts.rest[positional:]
        if name == "xargs":
            return [("xargs", rest or ("echo",))], []
        return ([("", rest)] if rest else []), []
    if name in SHELLS:
        script = shell_script(args)
        return [], [script] if script is not None else []
    if name == "eval":
        return [], [" ".join(args)]
    if name == "watch":
        opts = parse_opts(args, "nd", ("--interval", "--differences"), stop=True)
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


def is_assignment(word: str) -> bool:
    """Whether ``word`` is a ``NAME=value`` (or ``NAME+=value``, ``NAME[i]=value``) assignment."""
    return _ASSIGNMENT.match(word) is not None


def assigned_name(assignment: str) -> str:
    """The variable an assignment sets: ``GIT_PAGER`` for ``GIT_PAGER=sh``."""
    return re.split(r"[\[+=]", assignment, maxsplit=1)[0]


def _strip_prefix(words: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(its variable assignments, the command without them, reserved words and a ``function NAME``)."""
    assignments: list[str] = []
    i = 0
    while i < len(words):
        if words[i] == "function":
            i += 2
        elif words[i] in RESERVED:
            i += 1
        elif is_assignment(words[i]):
            assignments.append(words[i])
            i += 1
        else:
            break
    rest = tuple(words[i:])
    if rest and rest[0] in _HEADERS:
        return tuple(assignments), ()
    return tuple(assignments), rest


def walk_commands(text: str, depth: int, *, lenient: bool) -> Iterator[Command]:
    """Every command the line runs, nested ones included, in reading order.

    Raises ``TooDeep`` past ``MAX_DEPTH`` levels, and ``CommandParseError`` for text that is not valid
    shell unless ``lenient``, which reads such text as a crude split of words instead.
    """
    if depth > MAX_DEPTH:
        raise TooDeep
    try:
        script = parse(text)
    except CommandParseError:
        if not lenient:
            raise
        script = parse_lenient(text)
    yield from _walk_nested(script, depth, lenient=lenient)
    stdin_shell = False
    fed: list[str] = list(script.heredocs)
    for simple in script.commands:
        for command in _expand(simple.words, simple.redirects, depth, lenient=lenient):
            yield command
            if command.name in SHELLS and not any(arg[:1] not in "-+" for arg in command.args):
                stdin_shell = True
            if command.name in ("echo", "printf"):
                fed.append(" ".join(command.args))
            fed.extend(target for op, target in command.redirects if op.endswith("<<<"))
    if stdin_shell:
        # `echo 'rm -rf /' | sh`, `sh <<EOF`, `bash <<< '...'`: what the shell reads is a script too.
        for text in fed:
            yield from walk_commands(text, depth + 1, lenient=lenient)


def _walk_nested(script: Script, depth: int, *, lenient: bool) -> Iterator[Command]:
    for substitution in script.substitutions:
        yield from walk_commands(substitution, depth + 1, lenient=lenient)
    for text in script.expansions:
        if depth + 1 > MAX_DEPTH:
            raise TooDeep
        try:
            nested = parse_expanding(text)
        except CommandParseError:
            if not lenient:
                raise
            yield from walk_commands(text, depth + 1, lenient=True)
            continue
        yield from _walk_nested(nested, depth + 1, lenient=lenient)


def _expand(
    words: Sequence[str],
    redirects: tuple[tuple[str, str], ...],
    depth: int,
    *,
    lenient: bool,
    via: str = "",
    inherited: tuple[str, ...] = (),
) -> Iterator[Command]:
    if depth > MAX_DEPTH:
        raise TooDeep
    own, words = _strip_prefix(words)
    assignments = (*inherited, *own)
    if not words:
        if redirects or assignments:
            # A bare `PATH=/tmp/x` changes what every later command of the line runs.
            yield Command("", "", (), redirects, via, assignments)
        return
    path, args = words[0], tuple(words[1:])
    name = path.rsplit("/", 1)[-1] if "/" in path.rstrip("/") else path
    yield Command(name, path, args, redirects, via, assignments)
    commands, scripts = _inner(name, args)
    for inner_via, inner in commands:
        yield from _expand(inner, (), depth + 1, lenient=lenient, via=inner_via or via, inherited=assignments)
    for script in scripts:
        yield from walk_commands(script, depth + 1, lenient=lenient)
