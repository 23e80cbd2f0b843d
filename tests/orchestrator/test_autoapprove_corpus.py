"""The auto-approve corpus: read-only command lines run with variables and code-running options.

Every read-only line of ``test_commands.READ_ONLY`` is run with each variable that makes a program
run another one, in each way a shell hands a command its environment; none may run unasked. The
same lines with only locale, time-zone and width variables stay read-only. The counts are printed
(``pytest -s``) so a shrinking corpus shows.
"""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.mesh import CatalogTool
from orchestrator.permissions import auto_approve, is_read_only_command
from tests.orchestrator.test_commands import READ_ONLY

SHELL = CatalogTool(  # noqa: S604 -- a catalog flag, no subprocess
    "sh", "run", "sh__run", "", {}, read_only=False, destructive=False, classification="dangerous", shell=True
)

UNSAFE_ASSIGNMENTS = (
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned'",
    "GIT_CONFIG_PARAMETERS=\"'core.pager'='sh -c id'\"",
    "GIT_PAGER='sh -c id'",
    "PAGER='sh -c id'",
    "GIT_EXTERNAL_DIFF=./x",
    "GIT_SSH_COMMAND='touch pwned'",
    "GIT_DIR=/tmp/evil/.git",
    "GIT_EXEC_PATH=/tmp/evil",
    "EDITOR=./x",
    "VISUAL=./x",
    "LESSOPEN='|touch pwned'",
    "BASH_ENV=/tmp/evil.sh",
    "ENV=/tmp/evil.sh",
    "LD_PRELOAD=/tmp/evil.so",
    "LD_LIBRARY_PATH=/tmp",
    "PATH=/tmp/evil:$PATH",
    "PS4='$(touch pwned)'",
    "IFS=x",
    "PROMPT_COMMAND='touch pwned'",
    "a[0]=x",
    "FOO+=bar",
)
SAFE_ASSIGNMENTS = ("LANG=C", "LC_ALL=C.UTF-8", "TZ=UTC", "NO_COLOR=1 COLUMNS=80", "LANGUAGE=en LINES=40")
FORMS = {
    "prefix": "{env} {line}",
    "env": "env {env} {line}",
    "env -i": "env -i {env} {line}",
    "command": "{env} command {line}",
    "exec env": "exec env {env} {line}",
    "nohup": "{env} nohup {line}",
    "set first": "{env}; {line}",
    "sh -c": "sh -c {quoted}",
}
"""How a variable reaches the command: each form is filled with every (variables, line) pair."""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _simple(line: str) -> bool:
    # Wrapping a pipeline or a list in a prefix changes which command gets the variable.
    return not any(mark in line for mark in ("|", ";", "&", "\n", "$(", "#")) and not line.startswith("env")


BASES = [line for line in READ_ONLY if _simple(line)]


def _corpus(assignments: tuple[str, ...]) -> list[tuple[str, str]]:
    corpus = []
    for form, template in FORMS.items():
        for env in assignments:
            for line in BASES:
                text = f"{env} {line}"
                corpus.append((form, template.format(env=env, line=line, quoted=_quote(text))))
    return corpus


UNSAFE = _corpus(UNSAFE_ASSIGNMENTS)
SAFE = [(form, text) for form, text in _corpus(SAFE_ASSIGNMENTS) if form in ("prefix", "env", "env -i")]


def test_no_read_only_line_runs_unasked_with_a_variable_that_runs_programs() -> None:
    approved = [text for _, text in UNSAFE if auto_approve(SHELL, {"command": text}, None).allow]
    counts = Counter(form for form, _ in UNSAFE)
    print(
        f"auto-approve corpus: {len(UNSAFE)} lines with unsafe variables "
        f"({len(BASES)} read-only lines x {len(UNSAFE_ASSIGNMENTS)} variable sets x {len(FORMS)} forms: "
        f"{dict(counts)}), {len(approved)} ran unasked"
    )
    assert approved == []
    assert len(UNSAFE) >= 5000


def test_locale_time_zone_and_width_variables_keep_a_line_read_only() -> None:
    asked = [text for _, text in SAFE if not is_read_only_command(text)]
    print(f"auto-approve corpus: {len(SAFE)} lines with safe variables, {len(asked)} asked")
    assert asked == []
    assert len(SAFE) >= 500


@pytest.mark.parametrize(
    "command",
    [
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch x' git status",
        "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch x' git status",
    ],
)
def test_the_fsmonitor_line_asks_and_says_which_variable(command: str) -> None:
    decision = auto_approve(SHELL, {"command": command}, None)
    assert (decision.allow, decision.reason) == (
        False,
        "the command runs with GIT_CONFIG_COUNT set, which can make a read-only program run another "
        "one; only locale, time-zone and width variables (LANG, LC_*, TZ, NO_COLOR, COLUMNS, LINES) "
        "run unasked",
    )


@pytest.mark.parametrize(
    "command",
    [
        "git -c core.fsmonitor='touch x' status",
        "git -p log",
        "git --paginate log",
        "git log --textconv",
        "git diff --ext-diff",
        "git log --output=x",
        "git show --upload-pack='touch x'",
        "git status --config=core.fsmonitor=x",
        "find . -exec touch {} +",
        "find . -ok cat {} ;",
        "rg --pre ./x TODO",
        "sort --compress-program=./x f",
    ],
)
def test_options_that_run_a_program_make_a_line_ask(command: str) -> None:
    assert auto_approve(SHELL, {"command": command}, None).allow is False
