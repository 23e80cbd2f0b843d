"""Which commands are known to change nothing: a table of programs with a check of their arguments.

A program is read-only only with arguments that cannot write, delete or run anything else; a path
outside the system binary directories (``./ls``) is never trusted. Nor is a command run with a
variable assignment (``FOO=1 ls``, ``env FOO=1 ls``) unless every variable is on a short list of
ones that only change formatting: ``GIT_CONFIG_COUNT``, ``GIT_PAGER``, ``LD_PRELOAD``, ``PATH`` and
many more make a read-only program run another one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from orchestrator.permissions.options import git_split, parse_opts, split_words
from orchestrator.permissions.shell import INPUT_REDIRECTS
from orchestrator.permissions.walk import SHELLS, Command, assigned_name, shell_script

_TRUSTED_BIN_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")

SAFE_VARIABLES = frozenset(
    split_words(
        "LANG LANGUAGE LC_ALL LC_COLLATE LC_CTYPE LC_MESSAGES LC_MONETARY LC_NUMERIC LC_TIME TZ "
        "NO_COLOR COLUMNS LINES"
    )
)
"""Variables a read-only command may be given: locale, time zone and output width, nothing a
program reads as a path, a command, a config or a library to load."""

_SED_WRITES = re.compile(r"(^|[^\\A-Za-z])[wWe]([^A-Za-z]|$)")


def _always(args: tuple[str, ...]) -> bool:
    return True


def _find_read_only(args: tuple[str, ...]) -> bool:
    actions = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
    return not actions.intersection(args)


def _sed_read_only(args: tuple[str, ...]) -> bool:
    opts = parse_opts(args, "efl", ("--expression", "--file", "--line-length"))
    if opts.has("-i", "--in-place", "-f", "--file"):
        return False
    scripts = opts.value("e", "--expression") or opts.positionals[:1]
    return bool(scripts) and not any(_SED_WRITES.search(script) for script in scripts)


def _without(
    short_values: str, long_values: tuple[str, ...], *refused: str
) -> Callable[[tuple[str, ...]], bool]:
    def check(args: tuple[str, ...]) -> bool:
        return not parse_opts(args, short_values, long_values).has(*refused)

    return check


def _uniq_read_only(args: tuple[str, ...]) -> bool:
    # ``uniq IN OUT`` writes OUT.
    return len(parse_opts(args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars")).positionals) <= 1


def _shell_read_only(args: tuple[str, ...]) -> bool:
    return shell_script(args) is not None


_GIT_RUNS_PROGRAMS = split_words(
    "--output --ext-diff --textconv --upload-pack --receive-pack --exec --config --open-files-in-pager "
    "--template --run"
)
"""Options that write a file or name a program (or a config that names one) for git to run."""
_GIT_LIST_VALUES = split_words("--contains --no-contains --merged --no-merged --points-at --sort --format")


def _git_read_only(args: tuple[str, ...]) -> bool:
    sub, rest, global_opts = git_split(args)
    if global_opts.has("-c", "--config-env", "--exec-path", "-p", "--paginate"):
        return False  # -c core.pager=... runs a program; so may a forced pager
    opts = parse_opts(rest)
    if opts.has(*_GIT_RUNS_PROGRAMS):
        return False
    if sub in ("status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "shortlog"):
        return True
    if sub == "branch":
        refused = split_words(
            "-d -D -m -M -c -C -f -u -t --delete --move --copy --force --set-upstream-to --unset-upstream "
            "--edit-description --track --no-track --create-reflog"
        )
        opts = parse_opts(rest, "", _GIT_LIST_VALUES)
        return not opts.has(*refused) and (not opts.positionals or opts.has("-l", "--list"))
    if sub == "tag":
        refused = split_words(
            "-d -a -s -m -f -F -u -e --delete --annotate --sign --message --file --force --local-user --edit "
            "--create-reflog"
        )
        opts = parse_opts(rest, "n", _GIT_LIST_VALUES)
        listing = opts.has("-l", "--list", "-v", "--verify")
        return not opts.has(*refused) and (not opts.positionals or listing)
    if sub == "remote":
        opts = parse_opts(rest)
        return not opts.positionals or opts.positionals[0] in ("get-url", "show")
    if sub == "config":
        opts = parse_opts(rest, "f", ("--file", "--blob", "--type", "--default"))
        reading = opts.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l")
        writing = opts.has(
            *split_words(
                "--add --unset --unset-all --replace-all --rename-section --remove-section -e --edit"
            )
        )
        return not writing and (reading or opts.positionals[:1] in (["get"], ["list"]))
    return False


_READ_ONLY: dict[str, Callable[[tuple[str, ...]], bool]] = {
    **dict.fromkeys(
        split_words(
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
    **dict.fromkeys(SHELLS, _shell_read_only),
}
_CHECKSUM = re.compile(r"^(sha\d*|b2|md5)sum$")


def read_only_name(name: str) -> bool:
    """Whether ``name`` is a program that is read-only with at least some arguments."""
    return name in _READ_ONLY or bool(_CHECKSUM.match(name))


def _redirects_read_only(redirects: tuple[tuple[str, str], ...]) -> bool:
    for op, target in redirects:
        base = op.lstrip("0123456789")
        if base in INPUT_REDIRECTS:
            continue
        if base == ">&" and (target.isdigit() or target == "-"):
            continue
        if target != "/dev/null":
            return False
    return True


def unsafe_assignment(command: Command) -> str | None:
    """The first variable the command is run with that is not in ``SAFE_VARIABLES``, else None."""
    for assignment in command.assignments:
        if assigned_name(assignment) not in SAFE_VARIABLES:
            return assignment
    return None


def command_read_only(command: Command) -> bool:
    """Whether this one command (not the ones nested in it) changes nothing, redirects and variables
    included."""
    if not _redirects_read_only(command.redirects) or unsafe_assignment(command) is not None:
        return False
    if "/" in command.path and not command.path.startswith(_TRUSTED_BIN_DIRS):
        return False  # ./ls is whatever the working directory holds
    if _CHECKSUM.match(command.name):
        return True
    check = _READ_ONLY.get(command.name)
    return check is not None and check(command.args)
