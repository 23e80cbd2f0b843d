"""Getopt-style reading of a command's arguments, as the commands themselves read them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def split_words(text: str) -> tuple[str, ...]:
    """The whitespace-separated words of ``text``: how the tables of names are written."""
    return tuple(text.split())


@dataclass
class Opts:
    """The options, option values and positionals found in one argument list."""

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
        """The values given to any of the options, in order (short options named without the dash)."""
        return [v for name in names for v in self.values.get(name, [])]


def parse_opts(
    args: Sequence[str], short_values: str = "", long_values: Sequence[str] = (), *, stop: bool = False
) -> Opts:
    """Getopt-style parsing: bundled short flags, ``--long[=value]``, ``--``.

    Options may follow positionals (GNU permutation) unless ``stop``, which ends at the first positional.
    """
    result = Opts()
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


def git_split(args: Sequence[str]) -> tuple[str, tuple[str, ...], Opts]:
    """``git [global options] SUBCOMMAND ARGS``: the subcommand, its arguments and the global options."""
    opts = parse_opts(args, "Cc", ("--git-dir", "--work-tree", "--namespace", "--config-env"), stop=True)
    if not opts.rest:
        return "", (), opts
    return opts.rest[0], tuple(opts.rest[1:]), opts
