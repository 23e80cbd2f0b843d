"""Shell command analysis: is a command line read-only, and is any part of it destructive?

The line is read the way a POSIX shell reads it (``shell``), and every command it runs is inspected,
nested ones included (``walk``): command substitutions, ``sh -c``, ``eval``, ``xargs``, ``find -exec``,
``sudo``/``env``/``timeout``... prefixes. This module holds the destructive checks; the table of
read-only programs is in ``readonly``.

Both questions fail safe: a command that cannot be parsed is never read-only, and the destructive
check then falls back to a lenient word split so that ``rm -rf / "`` is still caught.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from orchestrator.permissions.options import git_split, parse_opts, split_words
from orchestrator.permissions.readonly import command_read_only, read_only_name, unsafe_assignment
from orchestrator.permissions.shell import INPUT_REDIRECTS, CommandParseError
from orchestrator.permissions.walk import MAX_DEPTH, Command, TooDeep, walk_commands

__all__ = [
    "MAX_DEPTH",
    "CommandParseError",
    "destructive_reason",
    "edits_in_place",
    "is_read_only_command",
    "unsafe_variable",
]

_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|dm-|md|loop|mapper/|sr)")
_HARMLESS_DEVICES = re.compile(r"^/dev/(null|zero|stdout|stderr|tty|fd/\d+)$")
_SYSTEM_ROOTS = frozenset(
    split_words("/ /* ~ /bin /boot /dev /etc /home /lib /lib64 /opt /root /sbin /srv /usr /var")
)
_SQL_DROP = re.compile(r"\bDROP\s+(TABLE|DATABASE|SCHEMA)\b", re.IGNORECASE)
_SQL_TRUNCATE = re.compile(r"\bTRUNCATE\s+(TABLE\s+)?(ONLY\s+)?[\w\"`\[]", re.IGNORECASE)
_SQL_DELETE = re.compile(
    r"\bDELETE\s+FROM\s+(?:\"[^\"]*\"|`[^`]*`|\[[^]]*\]|[\w.$]+)(?P<rest>[^;'\"]*)", re.IGNORECASE
)
_FUNCTION_BODY = re.compile(r"\(\s*\)\s*\{(?P<body>[^}]{0,200})\}")
_FUNCTION_NAME = re.compile(r"([^\s(){}|&;<>]+)\s*$")


def _git_reason(args: tuple[str, ...]) -> str | None:
    sub, rest, _ = git_split(args)
    if "--no-verify" in rest:
        return f"git {sub} --no-verify skips the repository's hooks"
    if sub == "reset":
        return "git reset --hard discards uncommitted work" if "--hard" in rest else None
    if sub == "push":
        return _git_push_reason(rest)
    if sub == "clean":
        opts = parse_opts(rest, "eX", ("--exclude",))
        if opts.has("-f", "--force") and not opts.has("-n", "--dry-run"):
            return "git clean -f deletes untracked files"
        return None
    if sub in ("checkout", "restore"):
        opts = parse_opts(rest, "bBsp" if sub == "checkout" else "sp", ("--source", "--pathspec-from-file"))
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
        opts = parse_opts(rest)
        if opts.has("-D") or (opts.has("-d", "--delete") and opts.has("-f", "--force")):
            return "git branch -D deletes a branch even when it is not merged"
        return None
    if sub == "commit":
        opts = parse_opts(rest, "mCcFtS", ("--message", "--file", "--author", "--date", "--reuse-message"))
        if opts.has("--amend"):
            return "git commit --amend rewrites the last commit"
        if opts.has("-n"):
            return "git commit -n skips the repository's hooks"
    return None


def _git_push_reason(rest: tuple[str, ...]) -> str | None:
    opts = parse_opts(rest, "o", ("--push-option", "--repo", "--receive-pack", "--exec"))
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
    opts = parse_opts(args)
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
    opts = parse_opts(args, "so", ("--size", "--reference"))
    for size in opts.value("s", "--size"):
        if re.fullmatch(r"0+[KMGTPEZY]?(i?B)?", size) or size[:1] in ("-", "<"):
            return f"truncate -s {size} throws away file contents"
    return None


def _ownership_reason(name: str) -> Callable[[tuple[str, ...]], str | None]:
    def reason(args: tuple[str, ...]) -> str | None:
        opts = parse_opts(args, "", ("--reference", "--from"))
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
        opts = parse_opts(args, short_values, long_values)
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


_KUBECTL_VALUES = split_words(
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


def _command_reason(command: Command) -> str | None:
    for op, target in command.redirects:
        if op.lstrip("0123456789&") not in INPUT_REDIRECTS and _DEVICE.match(target):
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
        commands = list(walk_commands(command, 0, lenient=True))
    except TooDeep:
        return f"shell commands nested more than {MAX_DEPTH} levels deep cannot be inspected"
    for cmd in commands:
        if reason := _command_reason(cmd):
            return reason
    # SQL in an argument of grep or echo is text; handed to anything else it may be executed.
    if any(not read_only_name(cmd.name) for cmd in commands):
        return _sql_reason(command)
    return None


def is_read_only_command(command: str) -> bool:
    """True only when every command the line runs, nested ones included, is known to change nothing."""
    try:
        commands = list(walk_commands(command, 0, lenient=False))
    except (CommandParseError, TooDeep):
        return False
    return bool(commands) and all(command_read_only(cmd) for cmd in commands)


def unsafe_variable(command: str) -> str | None:
    """The first ``NAME=value`` the line runs a command with that is not a harmless formatting
    variable (``GIT_PAGER=sh git log``, ``env LD_PRELOAD=x ls``, ``PATH=/tmp; ls``), else None."""
    try:
        commands = list(walk_commands(command, 0, lenient=True))
    except TooDeep:
        return None
    return next((found for cmd in commands if (found := unsafe_assignment(cmd)) is not None), None)


def edits_in_place(command: str) -> bool:
    """True when the line runs ``sed -i`` (or ``--in-place``) anywhere."""
    try:
        commands = list(walk_commands(command, 0, lenient=True))
    except TooDeep:
        return False
    return any(cmd.name == "sed" and parse_opts(cmd.args, "efl").has("-i", "--in-place") for cmd in commands)
